package runtime

import (
	"errors"
	"fmt"
)

// Renumbering of function indices outside the code section, for the yield import that
// instrument adds in front of the defined functions.
// remapConstExpr copies a constant expression (up to and including its end) from r to out
// with ref.func indices renumbered.
func remapConstExpr(out []byte, r *reader, x *fuelIndex) []byte {
	for r.err == nil {
		at := r.i
		op := r.byte()
		im, err := skipImmediates(r, op)
		if err != nil {
			r.fail(err)
			break
		}
		if op == 0x23 { // global.get
			if g := (&reader{b: r.b, i: at + 1}).u32(); g >= x.fuel {
				r.fail(fmt.Errorf("unknown global %d", g))
				break
			}
		}
		if im.funcIdx {
			out = append(out, op)
			out = appendU32(out, x.fn(im.idx))
		} else {
			out = append(out, r.b[at:r.i]...)
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
	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		at := r.i
		if t := r.byte(); !isValType(t) {
			r.fail(fmt.Errorf("global of unknown type 0x%02x", t))
		}
		r.byte()
		out = append(out, payload[at:r.i]...)
		out = remapConstExpr(out, r, x)
	}
	if r.err == nil && r.i != len(payload) {
		r.fail(errors.New("trailing bytes"))
	}
	return out, r.err
}

func remapExports(payload []byte, x *fuelIndex) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		out = appendName(out, r.name())
		kind := r.byte()
		idx := r.u32()
		switch {
		case kind == 0x00:
			idx = x.fn(idx)
		case kind == 0x03 && idx >= x.fuel && r.err == nil:
			r.fail(fmt.Errorf("export of unknown global %d", idx))
		}
		out = append(out, kind)
		out = appendU32(out, idx)
	}
	if r.err == nil && r.i != len(payload) {
		r.fail(errors.New("trailing bytes"))
	}
	return out, r.err
}

// remapElems renumbers the function indices and ref.func expressions of element segments,
// in all eight encodings.
func remapElems(payload []byte, x *fuelIndex) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(nil, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		flags := r.u32()
		if flags > 7 {
			r.fail(fmt.Errorf("element segment flags %d", flags))
			break
		}
		out = appendU32(out, flags)
		if flags&1 == 0 { // active
			if flags&2 != 0 {
				out = appendU32(out, r.u32()) // table index
			}
			out = remapConstExpr(out, r, x) // offset
		}
		if flags&3 != 0 { // elemkind or reftype
			out = append(out, r.byte())
		}
		count := r.u32()
		out = appendU32(out, count)
		for i := uint32(0); i < count && r.err == nil; i++ {
			if flags&4 != 0 {
				out = remapConstExpr(out, r, x)
			} else {
				out = appendU32(out, x.fn(r.u32()))
			}
		}
		if r.err != nil {
			break
		}
	}
	if r.err == nil && r.i != len(payload) {
		r.fail(errors.New("trailing bytes"))
	}
	return out, r.err
}

// remapNames renumbers the function-indexed subsections of the name section (function,
// local and label names), and names each copy of a leaf (instrument_leaf.go) as its
// original, so a trap in it reads the same; the others are kept as they are. at is where
// the subsections start in payload, after the section's own name.
func remapNames(payload []byte, at int, x *fuelIndex) ([]byte, error) {
	out := append([]byte(nil), payload[:at]...)
	r := &reader{b: payload, i: at}
	for r.i < len(r.b) && r.err == nil {
		id := r.byte()
		sub := r.bytes(int(r.u32()))
		if r.err != nil {
			break
		}
		if id < 1 || id > 3 {
			out = append(out, id)
			out = appendU32(out, uint32(len(sub)))
			out = append(out, sub...)
			continue
		}
		sr := &reader{b: sub}
		n := sr.u32()
		var p []byte
		var copies []byte // the copies' names, which come last (the highest indices)
		added := uint32(0)
		for i := uint32(0); i < n && sr.err == nil; i++ {
			f := sr.u32()
			p = appendU32(p, x.fn(f))
			if id == 1 {
				name := sr.name()
				p = appendName(p, name)
				if c, ok := x.leafCopy(f); ok {
					copies = appendName(appendU32(copies, c), name)
					added++
				}
				continue
			}
			m := sr.u32()
			p = appendU32(p, m)
			for j := uint32(0); j < m && sr.err == nil; j++ {
				p = appendU32(p, sr.u32())
				p = appendName(p, sr.name())
			}
		}
		if sr.err == nil && sr.i != len(sub) {
			sr.fail(errors.New("trailing bytes"))
		}
		if sr.err != nil {
			return nil, sr.err
		}
		p = append(append(appendU32(nil, n+added), p...), copies...)
		out = append(out, id)
		out = appendU32(out, uint32(len(p)))
		out = append(out, p...)
	}
	return out, r.err
}
