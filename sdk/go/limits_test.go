//go:build !wasip1

package wqhost

import "testing"

// metaHost answers msg_meta from a map, as the host does for the call's keys.
type metaHost struct {
	emptyHost
	vals map[string]string
}

func (h metaHost) meta(key string, buf []byte) int32 { return fakeGet(h.vals)(key, buf) }

// TestMaxOutputBytes: MaxOutputBytes is the host's max_output_bytes metadata key, and 0
// (fall back to your own default) where the host does not tell or tells nonsense.
func TestMaxOutputBytes(t *testing.T) {
	for _, tc := range []struct {
		vals map[string]string
		want int
	}{
		{map[string]string{"max_output_bytes": "49152"}, 49152},
		{map[string]string{"max_output_bytes": "1048576"}, 1 << 20},
		{map[string]string{}, 0},
		{map[string]string{"max_output_bytes": "lots"}, 0},
		{map[string]string{"max_output_bytes": "-1"}, 0},
	} {
		old := native
		native = metaHost{vals: tc.vals}
		got := MaxOutputBytes()
		native = old
		if got != tc.want {
			t.Errorf("host meta %v: MaxOutputBytes() = %d, want %d", tc.vals, got, tc.want)
		}
	}
}
