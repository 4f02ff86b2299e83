package fuel

import (
	"fmt"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// leafBytes is the most code a leaf's longest path may weigh.
const leafBytes = 256

// leaves are the copied leaves of a module (see the package doc).
type leaves struct {
	// cost[f] is, for the defined function f, 1 plus the weight of its longest path in bytes
	// when f is copied, else 0.
	cost []uint32
	// copies lists the copied functions (defined indices), in the order of their copies.
	copies []uint32
	// copyOf[f] is the index of f's copy, in the instrumented module's function index space.
	copyOf map[uint32]uint32
	// bodies are the copied functions' bodies, as in the code section.
	bodies [][]byte
}

// findLeaves decodes every body of the code section payload and returns the leaves that some
// function calls directly, each with its copy's index: first is the index the first copy
// takes. params are the numbers of parameters of the defined functions.
func findLeaves(payload []byte, x *fuelIndex, params []uint32, first uint32) (*leaves, error) {
	r := &wasmbin.Reader{Buf: payload}
	n := r.U32()
	if r.Err != nil {
		return nil, r.Err
	}
	if int64(n) != int64(len(params)) {
		return nil, fmt.Errorf("%d bodies for %d functions", n, len(params))
	}
	lv := &leaves{cost: make([]uint32, n), copyOf: map[uint32]uint32{}}
	called := make([]bool, n)
	srcs := make([][]byte, n)
	s := bodyScratch{segment: 1<<63 - 1, x: x}
	for f := range n {
		size := r.U32()
		src := r.Bytes(int(size))
		if r.Err != nil {
			return nil, fmt.Errorf("function %d: %w", f, r.Err)
		}
		start, locals, err := bodyLocals(src)
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", f, err)
		}
		s.locals = locals + uint64(params[f])
		if err := s.decode(src, start); err != nil {
			return nil, fmt.Errorf("function body %d: %w", f, err)
		}
		loop := false
		for _, in := range s.insts {
			loop = loop || in.kind == opLoop
			if in.flags&flagCall != 0 && src[in.at] == 0x10 {
				if c := (&wasmbin.Reader{Buf: src, Pos: int(in.at) + 1}).U32(); c >= x.yield && c-x.yield < n {
					called[c-x.yield] = true
				}
			}
		}
		if loop || s.calls {
			continue
		}
		if w := s.longestPath(len(src)); w <= leafBytes {
			lv.cost[f] = uint32(w) + 1
			srcs[f] = src
		}
	}
	if r.Pos != len(payload) {
		return nil, fmt.Errorf("%d trailing bytes", len(payload)-r.Pos)
	}
	for f := range n {
		if lv.cost[f] == 0 {
			continue
		}
		if !called[f] {
			lv.cost[f] = 0
			continue
		}
		lv.copyOf[f] = first + uint32(len(lv.copies))
		lv.copies = append(lv.copies, f)
		lv.bodies = append(lv.bodies, srcs[f])
	}
	return lv, nil
}

// leafCost returns the weight of the copied leaf called by `call c` (c an index of the
// original module) and whether there is one.
func (x *fuelIndex) leafCost(c uint32) (uint32, bool) {
	if x.leaves == nil || c < x.yield || uint64(c-x.yield) >= uint64(len(x.leaves.cost)) {
		return 0, false
	}
	w := x.leaves.cost[c-x.yield]
	return w - 1, w != 0
}

// longestPath is the weight in bytes of the longest path through a decoded body with no
// loop, as place computes it (bodyEnd is the body's length).
func (s *bodyScratch) longestPath(bodyEnd int) uint64 {
	s.place(bodyEnd)
	return s.entryCost
}

// bodyLocals reads the local declarations at the start of a body: it returns where the
// code starts and the number of locals declared.
func bodyLocals(src []byte) (int, uint64, error) {
	r := &wasmbin.Reader{Buf: src}
	groups := r.U32()
	var n uint64
	for range groups {
		n += uint64(r.U32())
		if t := r.Byte(); !wasmbin.IsValType(t) {
			return 0, 0, fmt.Errorf("local of unknown type 0x%02x", t)
		}
	}
	if r.Err != nil {
		return 0, 0, fmt.Errorf("locals: %w", r.Err)
	}
	return r.Pos, n, nil
}

// appendLeafCopies appends the bodies of the leaves' copies: each its original with no check
// (a leaf calls nothing, so nothing in it is renumbered but ref.func).
func appendLeafCopies(out []byte, x *fuelIndex, params []uint32, opt Options) ([]byte, error) {
	s := bodyScratch{segment: opt.Segment, unroll: 1, noChecks: true}
	var body []byte
	for k, f := range x.leaves.copies {
		var err error
		body, err = instrumentBody(body[:0], x.leaves.bodies[k], x, params[f], &s)
		if err != nil {
			return nil, fmt.Errorf("copy of function body %d: %w", f, err)
		}
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out, nil
}

// leafCopy returns the index of the copy of the function f (an index of the original
// module), if it has one.
func (x *fuelIndex) leafCopy(f uint32) (uint32, bool) {
	if x.leaves == nil || f < x.yield {
		return 0, false
	}
	c, ok := x.leaves.copyOf[f-x.yield]
	return c, ok
}
