package wasmtest

import (
	"bytes"
	"testing"
)

// TestI32Const: the immediate is signed LEB128 (the wasm spec's encoding), checked against
// hand-encoded values including the sign-bit edges of each byte count.
func TestI32Const(t *testing.T) {
	for _, tc := range []struct {
		v    int32
		want []byte
	}{
		{0, []byte{0x00}},
		{7, []byte{0x07}},
		{63, []byte{0x3f}},
		{64, []byte{0xc0, 0x00}},
		{-1, []byte{0x7f}},
		{-64, []byte{0x40}},
		{-65, []byte{0xbf, 0x7f}},
		{600000, []byte{0xc0, 0xcf, 0x24}},
		{16 << 20, []byte{0x80, 0x80, 0x80, 0x08}},
		{-1 << 31, []byte{0x80, 0x80, 0x80, 0x80, 0x78}},
	} {
		if got := I32Const(tc.v); !bytes.Equal(got, append([]byte{0x41}, tc.want...)) {
			t.Errorf("I32Const(%d) = % x, want 41 % x", tc.v, got, tc.want)
		}
	}
}
