package runtime

import (
	"errors"
	"fmt"
)

// The WebAssembly binary format as far as the instrumenter (instrument.go) needs it: a
// reader of sections and instructions, and the encoders it writes with.
func isValType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f: // i32 i64 f32 f64 v128 funcref externref
		return true
	}
	return false
}

// immediates is what the instrumenter needs to know of an instruction's immediates.
type immediates struct {
	funcIdx bool   // the instruction's one immediate, idx, is a function index
	idx     uint32 // valid with funcIdx
	bulk    bool   // a bulk memory or table operation, or memory.grow: work not bounded by code size
}

// skipImmediates advances r past op's immediates and describes them. It knows
// the instructions of WebAssembly 2.0 (sign extension, saturating conversions, bulk memory,
// reference types, multi-value, SIMD), tail calls, threads' atomics and multiple memories;
// anything else (exceptions, GC, relaxed SIMD...) is an error.
func skipImmediates(r *reader, op byte) (im immediates, err error) {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		op >= 0x45 && op <= 0xc4 || op == 0xd1:
		// no immediates
	case op == 0x02 || op == 0x03 || op == 0x04:
		r.blockType()
	case op == 0x10 || op == 0x12 || op == 0xd2: // call, return_call, ref.func
		im.funcIdx, im.idx = true, r.u32()
	case op == 0x40: // memory.grow
		r.u32()
		im.bulk = true
	case op == 0x0c || op == 0x0d || op >= 0x20 && op <= 0x26 || op == 0x3f:
		r.u32()
	case op == 0x11 || op == 0x13:
		r.u32()
		r.u32()
	case op == 0x0e:
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x1c:
		n := r.u32()
		for i := uint32(0); i < n && r.err == nil; i++ {
			if t := r.byte(); !isValType(t) {
				return im, fmt.Errorf("select of unknown type 0x%02x", t)
			}
		}
	case op >= 0x28 && op <= 0x3e:
		r.memarg()
	case op == 0x41:
		r.leb(5)
	case op == 0x42:
		r.leb(10)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0:
		if t := r.byte(); t != 0x70 && t != 0x6f {
			return im, fmt.Errorf("ref.null of unknown type 0x%02x", t)
		}
	case op == 0xfc:
		sub := r.u32()
		im.bulk = sub >= 8 && sub != 9 && sub != 13 && sub != 16 // not data.drop, elem.drop, table.size
		switch {
		case sub <= 7:
		case sub == 9 || sub == 11 || sub == 13 || sub >= 15 && sub <= 17:
			r.u32()
		case sub == 8 || sub == 10 || sub == 12 || sub == 14:
			r.u32()
			r.u32()
		default:
			return im, fmt.Errorf("unknown 0xfc sub-opcode %d", sub)
		}
	case op == 0xfd:
		sub := r.u32()
		switch {
		case sub <= 11 || sub == 92 || sub == 93:
			r.memarg()
		case sub == 12 || sub == 13:
			r.bytes(16)
		case sub >= 21 && sub <= 34:
			r.bytes(1)
		case sub >= 84 && sub <= 91:
			r.memarg()
			r.bytes(1)
		case sub <= 255:
		default:
			return im, fmt.Errorf("unknown SIMD sub-opcode %d", sub)
		}
	case op == 0xfe:
		sub := r.u32()
		switch {
		case sub == 3:
			r.bytes(1)
		case sub <= 0x4e:
			r.memarg()
		default:
			return im, fmt.Errorf("unknown atomic sub-opcode %d", sub)
		}
	default:
		return im, fmt.Errorf("unknown opcode")
	}
	return im, r.err
}

// reader decodes the binary format; the first error sticks.
type reader struct {
	b   []byte
	i   int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.i = len(r.b)
}

func (r *reader) byte() byte {
	if r.err != nil || r.i >= len(r.b) {
		r.fail(errors.New("unexpected end"))
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b)-r.i {
		r.fail(errors.New("unexpected end"))
		return nil
	}
	s := r.b[r.i : r.i+n]
	r.i += n
	return s
}

// leb reads a LEB128 number of at most maxBytes bytes and returns its low 64 bits.
func (r *reader) leb(maxBytes int) uint64 {
	var v uint64
	for n := 0; ; n++ {
		if n == maxBytes {
			r.fail(errors.New("LEB128 number too long"))
			return 0
		}
		c := r.byte()
		if r.err != nil {
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

func (r *reader) u32() uint32 {
	v := r.leb(5)
	if v > 0xffffffff {
		r.fail(errors.New("u32 out of range"))
	}
	return uint32(v)
}

func (r *reader) name() string {
	n := r.u32()
	return string(r.bytes(int(n)))
}

func (r *reader) blockType() {
	if r.err != nil || r.i >= len(r.b) {
		r.fail(errors.New("unexpected end"))
		return
	}
	if c := r.b[r.i]; c == 0x40 || isValType(c) {
		r.i++
		return
	}
	r.leb(5) // s33 type index
}

func (r *reader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multiple memories: a memory index follows
		r.u32()
	}
	r.leb(10) // offset, u64 with memory64
}

func (r *reader) limits() {
	flags := r.byte()
	if flags > 0x07 {
		r.fail(fmt.Errorf("unknown limits flags 0x%02x", flags))
		return
	}
	r.leb(10)
	if flags&1 != 0 {
		r.leb(10)
	}
}

// funcTypeParams returns the number of parameters of each type, refusing anything but plain
// function types (the GC proposal's recursive and sub types would need a different encoding
// of the new one).
func funcTypeParams(payload []byte) ([]uint32, error) {
	r := &reader{b: payload}
	n := r.u32()
	params := make([]uint32, 0, min(n, uint32(len(payload))))
	for range n {
		if f := r.byte(); f != 0x60 {
			r.fail(fmt.Errorf("type form 0x%02x", f))
		}
		for k := range 2 { // params, results
			m := r.u32()
			for i := uint32(0); i < m && r.err == nil; i++ {
				if t := r.byte(); !isValType(t) {
					r.fail(fmt.Errorf("value of unknown type 0x%02x", t))
				}
			}
			if k == 0 {
				params = append(params, m)
			}
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	if r.err == nil && r.i != len(payload) {
		r.fail(errors.New("trailing bytes"))
	}
	return params, r.err
}

// countImports returns the numbers of imports of every kind (the section's own count), of
// imported functions and of imported globals, checking function types against the number of
// types.
func countImports(payload []byte, types uint32) (all, funcs, globals uint32, err error) {
	r := &reader{b: payload}
	n := r.u32()
	for range n {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // func
			if t := r.u32(); t >= types && r.err == nil {
				r.fail(fmt.Errorf("function import of unknown type %d", t))
			}
			funcs++
		case 0x01: // table
			if t := r.byte(); t != 0x70 && t != 0x6f {
				r.fail(fmt.Errorf("table of unknown type 0x%02x", t))
			}
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			if t := r.byte(); !isValType(t) {
				r.fail(fmt.Errorf("global of unknown type 0x%02x", t))
			}
			r.byte()
			globals++
		default:
			r.fail(fmt.Errorf("unknown import kind 0x%02x", kind))
		}
		if r.err != nil {
			return 0, 0, 0, r.err
		}
	}
	if r.err == nil && r.i != len(payload) {
		r.fail(errors.New("trailing bytes"))
	}
	return n, funcs, globals, r.err
}

// funcParams returns the number of parameters of each function of the function section,
// checking its type indices against typeParams (funcTypeParams).
func funcParams(payload []byte, typeParams []uint32) ([]uint32, error) {
	r := &reader{b: payload}
	n := r.u32()
	params := make([]uint32, 0, min(n, uint32(len(payload))))
	for i := uint32(0); i < n && r.err == nil; i++ {
		t := r.u32()
		if r.err == nil && int64(t) >= int64(len(typeParams)) {
			r.fail(fmt.Errorf("function %d of unknown type %d", i, t))
		}
		if r.err == nil {
			params = append(params, typeParams[t])
		}
	}
	return params, r.err
}

// appendVec appends one entry to a vector's encoding: payload is the vector (count first) or
// nil for an empty one, n its current count.
func appendVec(payload []byte, n uint32, entry []byte) []byte {
	out := appendU32(nil, n+1)
	if payload != nil {
		r := &reader{b: payload}
		r.u32()
		out = append(out, payload[r.i:]...)
	}
	return append(out, entry...)
}

// appendS32 appends v as a signed LEB128.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// appendS32Padded appends v as a signed LEB128 of exactly 5 bytes, which patchS32 can
// overwrite in place.
func appendS32Padded(b []byte, v int32) []byte {
	var p [5]byte
	patchS32(p[:], v)
	return append(b, p[:]...)
}

func patchS32(b []byte, v int32) {
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

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}
