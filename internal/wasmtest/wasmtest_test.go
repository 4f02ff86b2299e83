package wasmtest

import (
	"bytes"
	"testing"
)

// TestI32Const: constants are signed LEB128, which wasm validators and runtimes decode.
func TestI32Const(t *testing.T) {
	for _, tc := range []struct {
		v    int32
		want []byte
	}{
		{0, []byte{0x41, 0x00}},
		{3, []byte{0x41, 0x03}},
		{63, []byte{0x41, 0x3f}},
		{64, []byte{0x41, 0xc0, 0x00}},
		{-1, []byte{0x41, 0x7f}},
		{-64, []byte{0x41, 0x40}},
		{-65, []byte{0x41, 0xbf, 0x7f}},
		{64 << 20, []byte{0x41, 0x80, 0x80, 0x80, 0x20}},
	} {
		if got := I32Const(tc.v); !bytes.Equal(got, tc.want) {
			t.Errorf("I32Const(%d) = % x, want % x", tc.v, got, tc.want)
		}
	}
}
