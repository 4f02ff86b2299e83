package azure

import (
	"bytes"
	"testing"
)

// TestMaxMessageBytesIsExact: a body of MaxMessageBytes encodes to message text within
// Azure's limit, and one byte more does not, under both encodings: the limit the host gives
// guests is the real one, not a guess with a margin.
func TestMaxMessageBytesIsExact(t *testing.T) {
	for _, tc := range []struct {
		enc  Encoding
		want int
	}{{EncodingBase64, 49152}, {EncodingText, 65536}} {
		q := &Queue{name: "jobs", b: &Backend{enc: tc.enc}}
		n := q.MaxMessageBytes()
		if n != tc.want {
			t.Errorf("%s: MaxMessageBytes %d, want %d", tc.enc, n, tc.want)
		}
		for _, size := range []int{n, n + 1} {
			text, err := encode(tc.enc, bytes.Repeat([]byte{'x'}, size), nil)
			if err != nil {
				t.Fatal(err)
			}
			if fits := len(text) <= maxMessageText; fits != (size == n) {
				t.Errorf("%s: a body of %d bytes encodes to %d characters (limit %d): fits=%v", tc.enc, size, len(text), maxMessageText, fits)
			}
		}
		if got := (&Backend{enc: tc.enc}).MaxBodySize(); got != n {
			t.Errorf("%s: Backend.MaxBodySize %d, Queue.MaxMessageBytes %d", tc.enc, got, n)
		}
	}
}
