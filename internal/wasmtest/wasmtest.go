// Package wasmtest assembles tiny WebAssembly modules for tests: hostile or malformed guests
// (a wrong marker signature, endless recursion) that no compiler would produce on purpose.
package wasmtest

import "encoding/binary"

// Value types of the wasm binary format.
const (
	I32 byte = 0x7f
	I64 byte = 0x7e
)

// Func is one function of a module, exported under Export.
type Func struct {
	Export  string
	Params  []byte // value types
	Results []byte // value types
	// Body is the function's code without the locals vector and the final end opcode.
	Body []byte
}

// Call returns the instruction calling function index i (in the order given to Module).
func Call(i int) []byte { return binary.AppendUvarint([]byte{0x10}, uint64(i)) }

// I32Const returns the instruction pushing v.
func I32Const(v int32) []byte { return AppendSLEB([]byte{0x41}, int64(v)) }

// AppendSLEB appends v in signed LEB128, the encoding of wasm's constants (not Go's
// zig-zag varint, which agrees with it only for 0).
func AppendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// Loop is an endless loop: loop; br 0; end.
var Loop = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}

// Module returns a module with the functions fs (each with its own type, no imports) and one
// page of memory exported as "memory".
func Module(fs ...Func) []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	name := func(b []byte, s string) []byte { return append(uleb(b, len(s)), s...) }
	section := func(mod []byte, id byte, body []byte) []byte {
		return append(uleb(append(mod, id), len(body)), body...)
	}
	types, funcs, code := uleb(nil, len(fs)), uleb(nil, len(fs)), uleb(nil, len(fs))
	exports := uleb(nil, len(fs)+1)
	for i, f := range fs {
		types = append(types, 0x60)
		types = append(uleb(types, len(f.Params)), f.Params...)
		types = append(uleb(types, len(f.Results)), f.Results...)
		funcs = uleb(funcs, i)
		exports = append(name(exports, f.Export), 0x00)
		exports = uleb(exports, i)
		body := append(append([]byte{0x00}, f.Body...), 0x0b)
		code = append(uleb(code, len(body)), body...)
	}
	exports = append(name(exports, "memory"), 0x02, 0x00)
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, types)
	mod = section(mod, 3, funcs)
	mod = section(mod, 5, []byte{0x01, 0x00, 0x01}) // one memory, min 1 page
	mod = section(mod, 7, exports)
	return section(mod, 10, code)
}
