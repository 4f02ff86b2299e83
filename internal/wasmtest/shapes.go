package wasmtest

import "slices"

// CodeShape is a guest of CodeShapes.
type CodeShape struct {
	Name string
	Wasm []byte
}

// CodeShapes are guests that run endlessly through 32 KiB of straight-line code, counting
// the rounds at offset 8 of their memory: one calling a straight-line function in a loop,
// one whose loop has that code as its body.
func CodeShapes() []CodeShape {
	marker := Func{Export: "wqhost_abi_v1"}
	count := []byte{0x41, 8, 0x41, 8, 0x28, 2, 0, 0x41, 1, 0x6a, 0x36, 2, 0} // mem[8]++
	loopForever := func(body []byte) []byte {
		return slices.Concat([]byte{0x03, 0x40}, count, body, []byte{0x0c, 0x00, 0x0b, 0x00}) // loop count body br 0 end unreachable
	}
	return []CodeShape{
		{"straight-line function called in a loop", Module(marker,
			Func{Export: "heavy", Body: SqrtChain(ShapeBytes)},
			Func{Export: "wqhost_handle", Results: []byte{I32}, Body: loopForever(Call(1))})},
		{"huge loop body", Module(marker,
			Func{Export: "wqhost_handle", Results: []byte{I32}, Body: loopForever(SqrtChain(ShapeBytes))})},
	}
}

// ShapeBytes is the straight-line code of a CodeShapes guest.
const ShapeBytes = 32 << 10
