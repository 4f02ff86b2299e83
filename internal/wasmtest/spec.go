package wasmtest

import (
	"bytes"
	"encoding/binary"
)

// Import is a function a Spec imports; imported functions take the first indices.
type Import struct {
	Module, Name    string
	Params, Results []byte // value types
}

// Data is an active data segment: Bytes at Offset of the memory.
type Data struct {
	Offset uint32
	Bytes  []byte
}

// Spec is a module with imports, a memory of MemPages pages (at least 1 without MemMax)
// exported as "memory", data segments and the functions Funcs (indices after the imports,
// each with its own type, exported under its Export).
type Spec struct {
	Imports  []Import
	Funcs    []Func
	MemPages uint32
	// MemMax, when set, is the memory's declared maximum in pages; MemPages may then be 0.
	MemMax *uint32
	Data   []Data
}

// Bytes assembles the module.
func (s Spec) Bytes() []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	name := func(b []byte, s string) []byte { return append(uleb(b, len(s)), s...) }
	section := func(mod []byte, id byte, body []byte) []byte {
		return append(uleb(append(mod, id), len(body)), body...)
	}
	sig := func(b, params, results []byte) []byte {
		b = append(uleb(append(b, 0x60), len(params)), params...)
		return append(uleb(b, len(results)), results...)
	}
	types := uleb(nil, len(s.Imports)+len(s.Funcs))
	imports := uleb(nil, len(s.Imports))
	for i, im := range s.Imports {
		types = sig(types, im.Params, im.Results)
		imports = append(name(name(imports, im.Module), im.Name), 0x00)
		imports = uleb(imports, i)
	}
	funcs, code := uleb(nil, len(s.Funcs)), uleb(nil, len(s.Funcs))
	exports := uleb(nil, len(s.Funcs)+1)
	for i, f := range s.Funcs {
		types = sig(types, f.Params, f.Results)
		funcs = uleb(funcs, len(s.Imports)+i)
		exports = append(name(exports, f.Export), 0x00)
		exports = uleb(exports, len(s.Imports)+i)
		body := append(append([]byte{0x00}, f.Body...), 0x0b)
		code = append(uleb(code, len(body)), body...)
	}
	exports = append(name(exports, "memory"), 0x02, 0x00)
	data := uleb(nil, len(s.Data))
	for _, d := range s.Data {
		data = append(data, 0x00)
		data = append(AppendSLEB(append(data, 0x41), int64(int32(d.Offset))), 0x0b)
		data = append(uleb(data, len(d.Bytes)), d.Bytes...)
	}
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, types)
	if len(s.Imports) > 0 {
		mod = section(mod, 2, imports)
	}
	mod = section(mod, 3, funcs)
	if s.MemMax != nil {
		mod = section(mod, 5, uleb(uleb([]byte{0x01, 0x01}, int(s.MemPages)), int(*s.MemMax)))
	} else {
		mod = section(mod, 5, uleb([]byte{0x01, 0x00}, int(max(s.MemPages, 1))))
	}
	mod = section(mod, 7, exports)
	mod = section(mod, 10, code)
	if len(s.Data) > 0 {
		mod = section(mod, 11, data)
	}
	return mod
}

// Instructions for Spec bodies.
var (
	Drop = []byte{0x1a}
)

// Forever returns an endless loop around body: loop; body; br 0; end.
func Forever(body ...[]byte) []byte {
	out := []byte{0x03, 0x40}
	for _, b := range body {
		out = append(out, b...)
	}
	return append(out, 0x0c, 0x00, 0x0b)
}

// I32s returns the instructions pushing vs, in order.
func I32s(vs ...int32) []byte {
	var out []byte
	for _, v := range vs {
		out = append(out, I32Const(v)...)
	}
	return out
}

// I64Const returns the instruction pushing v.
func I64Const(v int64) []byte { return AppendSLEB([]byte{0x42}, v) }

// MemoryFill returns memory.fill of n bytes at dst with the byte val.
func MemoryFill(dst, val, n int32) []byte {
	return append(I32s(dst, val, n), 0xfc, 0x0b, 0x00)
}

// Load32 returns i32.load of the word at addr.
func Load32(addr int32) []byte { return append(I32Const(addr), 0x28, 0x02, 0x00) }

// Copy32 returns the code copying the i32 at src to dst.
func Copy32(dst, src int32) []byte {
	return append(append(I32Const(dst), Load32(src)...), 0x36, 0x02, 0x00)
}

// CountTo returns a loop that counts the i32 at addr up from its value, one a pass, until
// it reaches n: a known amount of guest work (n passes from a zeroed word).
func CountTo(addr, n int32) []byte {
	out := []byte{0x03, 0x40} // loop
	out = append(out, I32Const(addr)...)
	out = append(out, Load32(addr)...)
	out = append(out, I32Const(1)...)
	out = append(out, 0x6a, 0x36, 0x02, 0x00) // i32.add; i32.store
	out = append(out, Load32(addr)...)
	out = append(out, I32Const(n)...)
	return append(out, 0x49, 0x0d, 0x00, 0x0b) // i32.lt_u; br_if 0; end
}

// SqrtChain is straight-line code of about n bytes that takes long per byte: a chain of
// dependent f64.sqrt (one byte each, tens of cycles of latency) on a value the compiler
// cannot know, read from memory, and stored back (code without an effect would be dropped).
func SqrtChain(n int) []byte {
	b := []byte{0x41, 0x00, 0x41, 0x00, 0x2b, 0x03, 0x00} // i32.const 0 (for the store); i32.const 0; f64.load
	b = append(b, 0x44, 0, 0, 0, 0, 0, 0, 0, 0x40, 0xa0)  // f64.const 2; f64.add
	b = append(b, bytes.Repeat([]byte{0x9f}, n)...)       // f64.sqrt ...
	return append(b, 0x39, 0x03, 0x00)                    // f64.store
}
