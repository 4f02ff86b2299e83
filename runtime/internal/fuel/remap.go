package fuel

import (
	"errors"
	"fmt"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// remapConstExpr copies a constant expression (up to and including its end) from r to out
// with ref.func indices renumbered.
func remapConstExpr(out []byte, r *wasmbin.Reader, x *fuelIndex) []byte {
	for r.Err == nil {
		at := r.Pos
		op := r.Byte()
		im, err := wasmbin.SkipImmediates(r, op)
		if err != nil {
			r.Fail(err)
			break
		}
		if op == 0x23 { // global.get
			if g := (&wasmbin.Reader{Buf: r.Buf, Pos: at + 1}).U32(); g >= x.fuel {
				r.Fail(fmt.Errorf("unknown global %d", g))
				break
			}
		}
		if im.FuncIdx {
			out = append(out, op)
			out = wasmbin.AppendU32(out, x.fn(im.Idx))
		} else {
			out = append(out, r.Buf[at:r.Pos]...)
		}
		if op == 0x0b {
			break
		}
	}
	return out
}

// remapGlobals renumbers ref.func in the global section's initialisers; the result keeps
// the section's count first, like the input.
func remapGlobals(payload []byte, x *fuelIndex) ([]byte, error) {
	r := &wasmbin.Reader{Buf: payload}
	n := r.U32()
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n && r.Err == nil; i++ {
		at := r.Pos
		if t := r.Byte(); !wasmbin.IsValType(t) {
			r.Fail(fmt.Errorf("global of unknown type 0x%02x", t))
		}
		r.Byte()
		out = append(out, payload[at:r.Pos]...)
		out = remapConstExpr(out, r, x)
	}
	if r.Err == nil && r.Pos != len(payload) {
		r.Fail(errors.New("trailing bytes"))
	}
	return out, r.Err
}

func remapExports(payload []byte, x *fuelIndex) ([]byte, error) {
	r := &wasmbin.Reader{Buf: payload}
	n := r.U32()
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n && r.Err == nil; i++ {
		out = wasmbin.AppendName(out, r.Name())
		kind := r.Byte()
		idx := r.U32()
		switch {
		case kind == 0x00:
			idx = x.fn(idx)
		case kind == 0x03 && idx >= x.fuel && r.Err == nil:
			r.Fail(fmt.Errorf("export of unknown global %d", idx))
		}
		out = append(out, kind)
		out = wasmbin.AppendU32(out, idx)
	}
	if r.Err == nil && r.Pos != len(payload) {
		r.Fail(errors.New("trailing bytes"))
	}
	return out, r.Err
}

// remapElems renumbers the function indices and ref.func expressions of element segments,
// in all eight encodings.
func remapElems(payload []byte, x *fuelIndex) ([]byte, error) {
	r := &wasmbin.Reader{Buf: payload}
	n := r.U32()
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n && r.Err == nil; i++ {
		flags := r.U32()
		if flags > 7 {
			r.Fail(fmt.Errorf("element segment flags %d", flags))
			break
		}
		out = wasmbin.AppendU32(out, flags)
		if flags&1 == 0 { // active
			if flags&2 != 0 {
				out = wasmbin.AppendU32(out, r.U32()) // table index
			}
			out = remapConstExpr(out, r, x) // offset
		}
		if flags&3 != 0 { // elemkind or reftype
			out = append(out, r.Byte())
		}
		count := r.U32()
		out = wasmbin.AppendU32(out, count)
		for i := uint32(0); i < count && r.Err == nil; i++ {
			if flags&4 != 0 {
				out = remapConstExpr(out, r, x)
			} else {
				out = wasmbin.AppendU32(out, x.fn(r.U32()))
			}
		}
		if r.Err != nil {
			break
		}
	}
	if r.Err == nil && r.Pos != len(payload) {
		r.Fail(errors.New("trailing bytes"))
	}
	return out, r.Err
}

// remapNames renumbers the function-indexed subsections of the name section (function,
// local and label names), and names each copy of a leaf (instrument_leaf.go) as its
// original, so a trap in it reads the same; the others are kept as they are. at is where
// the subsections start in payload, after the section's own name.
func remapNames(payload []byte, at int, x *fuelIndex) ([]byte, error) {
	out := append([]byte(nil), payload[:at]...)
	r := &wasmbin.Reader{Buf: payload, Pos: at}
	for r.Pos < len(r.Buf) && r.Err == nil {
		id := r.Byte()
		sub := r.Bytes(int(r.U32()))
		if r.Err != nil {
			break
		}
		if id < 1 || id > 3 {
			out = append(out, id)
			out = wasmbin.AppendU32(out, uint32(len(sub)))
			out = append(out, sub...)
			continue
		}
		sr := &wasmbin.Reader{Buf: sub}
		n := sr.U32()
		var p []byte
		var copies []byte // the copies' names, which come last (the highest indices)
		added := uint32(0)
		for i := uint32(0); i < n && sr.Err == nil; i++ {
			f := sr.U32()
			p = wasmbin.AppendU32(p, x.fn(f))
			if id == 1 {
				name := sr.Name()
				p = wasmbin.AppendName(p, name)
				if c, ok := x.leafCopy(f); ok {
					copies = wasmbin.AppendName(wasmbin.AppendU32(copies, c), name)
					added++
				}
				continue
			}
			m := sr.U32()
			p = wasmbin.AppendU32(p, m)
			for j := uint32(0); j < m && sr.Err == nil; j++ {
				p = wasmbin.AppendU32(p, sr.U32())
				p = wasmbin.AppendName(p, sr.Name())
			}
		}
		if sr.Err == nil && sr.Pos != len(sub) {
			sr.Fail(errors.New("trailing bytes"))
		}
		if sr.Err != nil {
			return nil, sr.Err
		}
		p = append(append(wasmbin.AppendU32(nil, n+added), p...), copies...)
		out = append(out, id)
		out = wasmbin.AppendU32(out, uint32(len(p)))
		out = append(out, p...)
	}
	return out, r.Err
}
