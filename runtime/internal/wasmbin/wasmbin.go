// Package wasmbin reads and writes the WebAssembly binary format as far as the runtime's
// two readers of module bytes need it: the fuel rewriter (runtime/internal/fuel), which
// decodes sections and instructions and writes them back renumbered, and the compile
// budget's pre-scan (runtime's shape check), which walks every count and length before
// wazero allocates by them.
//
// A Reader keeps the first error it meets and reads zeros after it, so a decoder reads a
// whole structure and checks Err once. Nothing here validates a module: that is wazero's
// job. What is here refuses what it cannot read (an unknown opcode, section or type).
package wasmbin

import (
	"errors"
	"fmt"
)

// IsValType reports whether t is a value type of WebAssembly 2.0.
func IsValType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f: // i32 i64 f32 f64 v128 funcref externref
		return true
	}
	return false
}

// Immediates is what the rewriter needs to know of an instruction's immediates.
type Immediates struct {
	FuncIdx bool   // the instruction's one immediate, idx, is a function index
	Idx     uint32 // valid with FuncIdx
	Bulk    bool   // a bulk memory or table operation, or memory.grow: work not bounded by code size
}

// SkipImmediates advances r past op's immediates and describes them. It knows
// the instructions of WebAssembly 2.0 (sign extension, saturating conversions, bulk memory,
// reference types, multi-value, SIMD), tail calls, threads' atomics and multiple memories;
// anything else (exceptions, GC, relaxed SIMD...) is an error.
func SkipImmediates(r *Reader, op byte) (im Immediates, err error) {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		op >= 0x45 && op <= 0xc4 || op == 0xd1:
		// no Immediates
	case op == 0x02 || op == 0x03 || op == 0x04:
		r.BlockType()
	case op == 0x10 || op == 0x12 || op == 0xd2: // call, return_call, ref.func
		im.FuncIdx, im.Idx = true, r.U32()
	case op == 0x40: // memory.grow
		r.U32()
		im.Bulk = true
	case op == 0x0c || op == 0x0d || op >= 0x20 && op <= 0x26 || op == 0x3f:
		r.U32()
	case op == 0x11 || op == 0x13:
		r.U32()
		r.U32()
	case op == 0x0e:
		n := r.U32()
		for i := uint32(0); i <= n && r.Err == nil; i++ {
			r.U32()
		}
	case op == 0x1c:
		n := r.U32()
		for i := uint32(0); i < n && r.Err == nil; i++ {
			if t := r.Byte(); !IsValType(t) {
				return im, fmt.Errorf("select of unknown type 0x%02x", t)
			}
		}
	case op >= 0x28 && op <= 0x3e:
		r.Memarg()
	case op == 0x41:
		r.LEB(5)
	case op == 0x42:
		r.LEB(10)
	case op == 0x43:
		r.Bytes(4)
	case op == 0x44:
		r.Bytes(8)
	case op == 0xd0:
		if t := r.Byte(); t != 0x70 && t != 0x6f {
			return im, fmt.Errorf("ref.null of unknown type 0x%02x", t)
		}
	case op == 0xfc:
		sub := r.U32()
		im.Bulk = sub >= 8 && sub != 9 && sub != 13 && sub != 16 // not data.drop, elem.drop, table.size
		switch {
		case sub <= 7:
		case sub == 9 || sub == 11 || sub == 13 || sub >= 15 && sub <= 17:
			r.U32()
		case sub == 8 || sub == 10 || sub == 12 || sub == 14:
			r.U32()
			r.U32()
		default:
			return im, fmt.Errorf("unknown 0xfc sub-opcode %d", sub)
		}
	case op == 0xfd:
		sub := r.U32()
		switch {
		case sub <= 11 || sub == 92 || sub == 93:
			r.Memarg()
		case sub == 12 || sub == 13:
			r.Bytes(16)
		case sub >= 21 && sub <= 34:
			r.Bytes(1)
		case sub >= 84 && sub <= 91:
			r.Memarg()
			r.Bytes(1)
		case sub <= 255:
		default:
			return im, fmt.Errorf("unknown SIMD sub-opcode %d", sub)
		}
	case op == 0xfe:
		sub := r.U32()
		switch {
		case sub == 3:
			r.Bytes(1)
		case sub <= 0x4e:
			r.Memarg()
		default:
			return im, fmt.Errorf("unknown atomic sub-opcode %d", sub)
		}
	default:
		return im, fmt.Errorf("unknown opcode")
	}
	return im, r.Err
}

// Reader decodes the binary format; the first error sticks.
type Reader struct {
	Buf []byte // the bytes read
	Pos int    // the offset of the next byte in Buf
	Err error  // the first error; every read after it returns zero values
}

// Fail records err, unless an error is already recorded, and moves to the end of Buf.
func (r *Reader) Fail(err error) {
	if r.Err == nil {
		r.Err = err
	}
	r.Pos = len(r.Buf)
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.Err != nil || r.Pos >= len(r.Buf) {
		r.Fail(errors.New("unexpected end"))
		return 0
	}
	c := r.Buf[r.Pos]
	r.Pos++
	return c
}

// Bytes reads n bytes, a slice of Buf.
func (r *Reader) Bytes(n int) []byte {
	if r.Err != nil || n < 0 || n > len(r.Buf)-r.Pos {
		r.Fail(errors.New("unexpected end"))
		return nil
	}
	s := r.Buf[r.Pos : r.Pos+n]
	r.Pos += n
	return s
}

// LEB reads a LEB128 number of at most maxBytes bytes and returns its low 64 bits.
func (r *Reader) LEB(maxBytes int) uint64 {
	var v uint64
	for n := 0; ; n++ {
		if n == maxBytes {
			r.Fail(errors.New("LEB128 number too long"))
			return 0
		}
		c := r.Byte()
		if r.Err != nil {
			return 0
		}
		if n < 10 {
			v |= uint64(c&0x7f) << (7 * n)
		}
		if c&0x80 == 0 {
			return v
		}
	}
}

// U32 reads an unsigned LEB128 number of at most 32 bits.
func (r *Reader) U32() uint32 {
	v := r.LEB(5)
	if v > 0xffffffff {
		r.Fail(errors.New("u32 out of range"))
	}
	return uint32(v)
}

// Name reads a name: a length and that many bytes.
func (r *Reader) Name() string {
	n := r.U32()
	return string(r.Bytes(int(n)))
}

// BlockType skips a block type: empty, a value type or a type index.
func (r *Reader) BlockType() {
	if r.Err != nil || r.Pos >= len(r.Buf) {
		r.Fail(errors.New("unexpected end"))
		return
	}
	if c := r.Buf[r.Pos]; c == 0x40 || IsValType(c) {
		r.Pos++
		return
	}
	r.LEB(5) // s33 type index
}

// Memarg skips a memory argument: alignment, a memory index with multiple memories, offset.
func (r *Reader) Memarg() {
	align := r.U32()
	if align&0x40 != 0 { // multiple memories: a memory index follows
		r.U32()
	}
	r.LEB(10) // offset, u64 with memory64
}

// Limits skips the limits of a table or memory.
func (r *Reader) Limits() {
	flags := r.Byte()
	if flags > 0x07 {
		r.Fail(fmt.Errorf("unknown limits flags 0x%02x", flags))
		return
	}
	r.LEB(10)
	if flags&1 != 0 {
		r.LEB(10)
	}
}

// Vec reads a vector's count, refusing one larger than the bytes left, and calls entry for
// each element until the first error.
func (r *Reader) Vec(what string, entry func(i uint32)) {
	n := r.U32()
	if r.Err == nil && uint64(n) > uint64(len(r.Buf)-r.Pos) {
		r.Fail(fmt.Errorf("%s: count %d past the end of its section", what, n))
		return
	}
	for i := uint32(0); i < n && r.Err == nil; i++ {
		entry(i)
	}
}

// ByteVec skips a vector of bytes (a name, a data segment's contents).
func (r *Reader) ByteVec(what string) {
	n := r.U32()
	if r.Err == nil && uint64(n) > uint64(len(r.Buf)-r.Pos) {
		r.Fail(fmt.Errorf("%s: length %d past the end of its section", what, n))
		return
	}
	r.Bytes(int(n))
}

// ConstExpr skips a constant expression, up to and including its end.
func (r *Reader) ConstExpr() {
	for r.Err == nil {
		op := r.Byte()
		if op == 0x0b {
			return
		}
		if _, err := SkipImmediates(r, op); err != nil {
			r.Fail(fmt.Errorf("constant expression: opcode 0x%02x: %w", op, err))
		}
	}
}

// RefType reads a reference type, refusing any but funcref and externref.
func (r *Reader) RefType() {
	if t := r.Byte(); r.Err == nil && t != 0x70 && t != 0x6f {
		r.Fail(fmt.Errorf("unknown reference type 0x%02x", t))
	}
}

// FuncTypeParams returns the number of parameters of each type, refusing anything but plain
// function types (the GC proposal's recursive and sub types would need a different encoding
// of the new one).
func FuncTypeParams(payload []byte) ([]uint32, error) {
	r := &Reader{Buf: payload}
	n := r.U32()
	params := make([]uint32, 0, min(n, uint32(len(payload))))
	for range n {
		if f := r.Byte(); f != 0x60 {
			r.Fail(fmt.Errorf("type form 0x%02x", f))
		}
		for k := range 2 { // params, results
			m := r.U32()
			for i := uint32(0); i < m && r.Err == nil; i++ {
				if t := r.Byte(); !IsValType(t) {
					r.Fail(fmt.Errorf("value of unknown type 0x%02x", t))
				}
			}
			if k == 0 {
				params = append(params, m)
			}
		}
		if r.Err != nil {
			return nil, r.Err
		}
	}
	if r.Err == nil && r.Pos != len(payload) {
		r.Fail(errors.New("trailing bytes"))
	}
	return params, r.Err
}

// CountImports returns the numbers of imports of every kind (the section's own count), of
// imported functions and of imported globals, checking function types against the number of
// types.
func CountImports(payload []byte, types uint32) (all, funcs, globals uint32, err error) {
	r := &Reader{Buf: payload}
	n := r.U32()
	for range n {
		r.Name()
		r.Name()
		switch kind := r.Byte(); kind {
		case 0x00: // func
			if t := r.U32(); t >= types && r.Err == nil {
				r.Fail(fmt.Errorf("function import of unknown type %d", t))
			}
			funcs++
		case 0x01: // table
			if t := r.Byte(); t != 0x70 && t != 0x6f {
				r.Fail(fmt.Errorf("table of unknown type 0x%02x", t))
			}
			r.Limits()
		case 0x02: // memory
			r.Limits()
		case 0x03: // global
			if t := r.Byte(); !IsValType(t) {
				r.Fail(fmt.Errorf("global of unknown type 0x%02x", t))
			}
			r.Byte()
			globals++
		default:
			r.Fail(fmt.Errorf("unknown import kind 0x%02x", kind))
		}
		if r.Err != nil {
			return 0, 0, 0, r.Err
		}
	}
	if r.Err == nil && r.Pos != len(payload) {
		r.Fail(errors.New("trailing bytes"))
	}
	return n, funcs, globals, r.Err
}

// FuncParams returns the number of parameters of each function of the function section,
// checking its type indices against typeParams (FuncTypeParams).
func FuncParams(payload []byte, typeParams []uint32) ([]uint32, error) {
	r := &Reader{Buf: payload}
	n := r.U32()
	params := make([]uint32, 0, min(n, uint32(len(payload))))
	for i := uint32(0); i < n && r.Err == nil; i++ {
		t := r.U32()
		if r.Err == nil && int64(t) >= int64(len(typeParams)) {
			r.Fail(fmt.Errorf("function %d of unknown type %d", i, t))
		}
		if r.Err == nil {
			params = append(params, typeParams[t])
		}
	}
	return params, r.Err
}

// FuncTypes returns the type index of each function of the function section.
func FuncTypes(payload []byte) ([]uint32, error) {
	r := &Reader{Buf: payload}
	n := r.U32()
	types := make([]uint32, 0, min(n, uint32(len(payload))))
	for i := uint32(0); i < n && r.Err == nil; i++ {
		types = append(types, r.U32())
	}
	return types, r.Err
}

// AppendVec appends one entry to a vector's encoding: payload is the vector (count first) or
// nil for an empty one, n its current count.
func AppendVec(payload []byte, n uint32, entry []byte) []byte {
	out := AppendU32(nil, n+1)
	if payload != nil {
		r := &Reader{Buf: payload}
		r.U32()
		out = append(out, payload[r.Pos:]...)
	}
	return append(out, entry...)
}

// AppendS32 appends v as a signed LEB128.
func AppendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendS32Padded appends v as a signed LEB128 of exactly 5 bytes, which PatchS32 can
// overwrite in place.
func AppendS32Padded(b []byte, v int32) []byte {
	var p [5]byte
	PatchS32(p[:], v)
	return append(b, p[:]...)
}

// PatchS32 writes v into b[:5] as a signed LEB128 of exactly 5 bytes.
func PatchS32(b []byte, v int32) {
	u := uint32(v)
	for i := range 4 {
		b[i] = byte(u&0x7f) | 0x80
		u >>= 7
	}
	b[4] = byte(u & 0x0f) // the top 4 bits; bit 6 of the last byte is the sign, set for negatives
	if v < 0 {
		b[4] |= 0x70
	}
}

// AppendU32 appends v as an unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendName appends s as a name: its length, then its bytes.
func AppendName(b []byte, s string) []byte {
	b = AppendU32(b, uint32(len(s)))
	return append(b, s...)
}
