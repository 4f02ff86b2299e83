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

// Compile bombs: small modules whose compilation costs far more than their size suggests
// (runtime's compile limits, docs/guarantees.md "Hostile guests"). Each exports its one
// function as wqhost_handle () -> i32 and a memory, so only the compile limits refuse it.

// NestedLoops returns a function body of n loops nested in one another.
func NestedLoops(n int) []byte { return Nested(0, n) }

// Nested returns a function body of blocks nested blocks with loops nested loops inside the
// innermost.
func Nested(blocks, loops int) []byte {
	body := make([]byte, 0, 3*(blocks+loops)+2)
	for range blocks {
		body = append(body, 0x02, 0x40) // block (empty block type)
	}
	for range loops {
		body = append(body, 0x03, 0x40) // loop
	}
	for range blocks + loops {
		body = append(body, 0x0b)
	}
	return append(body, I32Const(0)...)
}

// StraightLine returns a function body of about size bytes of i32.const 1; drop pairs.
func StraightLine(size int) []byte {
	body := make([]byte, 0, size+2)
	for len(body) < size {
		body = append(body, 0x41, 0x01, 0x1a)
	}
	return append(body, I32Const(0)...)
}

// Handle is a wqhost_handle export with body.
func Handle(body []byte) Func {
	return Func{Export: "wqhost_handle", Results: []byte{I32}, Body: body}
}

// WithLocals returns module with n i32 locals declared in its first function; module must be
// one of Module's, whose first body declares none.
func WithLocals(module []byte, n uint32) []byte {
	// Module's code section is last: id 10, size, count, then the first body's size and its
	// empty locals vector (0x00). Rebuild the section with one declaration instead.
	uleb := func(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
	i := lastSection(module)
	payload := module[i:]
	count, n1 := binary.Uvarint(payload)
	size, n2 := binary.Uvarint(payload[n1:])
	first := payload[n1+n2 : n1+n2+int(size)]
	body := uleb([]byte{0x01}, uint64(n))
	body = append(append(body, I32), first[1:]...)
	code := uleb(nil, count)
	code = append(uleb(code, uint64(len(body))), body...)
	code = append(code, payload[n1+n2+int(size):]...)
	out := append([]byte(nil), module[:sectionStart(module, i)]...)
	return append(uleb(append(out, 10), uint64(len(code))), code...)
}

// ManyFunctions returns a module of n empty functions besides wqhost_handle and a memory.
func ManyFunctions(n int) []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	section := func(mod []byte, id byte, body []byte) []byte {
		return append(uleb(append(mod, id), len(body)), body...)
	}
	types := []byte{0x02, 0x60, 0x00, 0x01, I32, 0x60, 0x00, 0x00}
	funcs := uleb(uleb(nil, n+1), 0)
	code := uleb(nil, n+1)
	handle := append([]byte{0x00}, append(I32Const(0), 0x0b)...)
	code = append(uleb(code, len(handle)), handle...)
	for range n {
		funcs = append(funcs, 1)
		code = append(code, 0x02, 0x00, 0x0b)
	}
	exports := append([]byte{0x02, 13}, "wqhost_handle"...)
	exports = append(exports, 0x00, 0x00, 6)
	exports = append(append(exports, "memory"...), 0x02, 0x00)
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, types)
	mod = section(mod, 3, funcs)
	mod = section(mod, 5, []byte{0x01, 0x00, 0x01})
	mod = section(mod, 7, exports)
	return section(mod, 10, code)
}

// BadCallType is a 30-byte module wazero 1.12's validator panics on (index out of range in
// func_validation.go): function 0 calls function 1, whose type index 5 is past the type
// section, and the validator reads the callee's type before it checks function 1's.
var BadCallType = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // types: () -> ()
	0x03, 0x03, 0x02, 0x00, 0x05, // functions: type 0, type 5
	0x0a, 0x09, 0x02, 0x04, 0x00, 0x10, 0x01, 0x0b, 0x02, 0x00, 0x0b, // call 1; end / end
}

// lastSection returns the offset of the last section's payload.
func lastSection(module []byte) int {
	i, last := 8, 8
	for i < len(module) {
		size, n := binary.Uvarint(module[i+1:])
		last = i + 1 + n
		i = last + int(size)
	}
	return last
}

// sectionStart returns the offset of the id byte of the section whose payload is at payload.
func sectionStart(module []byte, payload int) int {
	i := 8
	for i < len(module) {
		size, n := binary.Uvarint(module[i+1:])
		if i+1+n == payload {
			return i
		}
		i += 1 + n + int(size)
	}
	return len(module)
}
