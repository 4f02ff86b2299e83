package runtime

import "fmt"

// Small leaf functions called directly are charged by their callers (instrument.go has the
// scheme). A loop calling a small function used to pay twice per pass: the callee's entry
// charge and the loop's check, each a load, a subtraction and a store of the fuel global
// (a function that calls keeps its fuel there), chained through memory: the `call` case of
// BenchmarkFuelCost ran 1.94-2.03x on a 2 GHz EPYC.
//
// A leaf here is a defined function with no loop, no call of any kind (nor memory.fill or
// memory.copy, which are calls to the bulk helpers) and at most leafBytes of code on its
// longest path (divisions and bulk operations weighed as the checks weigh them, so
// memory.grow alone exceeds it). Such a function runs a bounded amount of code and cannot
// recurse. Each leaf that some function calls directly gets a copy with no check, appended
// after the module's own functions (and the bulk helpers), and every direct call of the leaf
// calls the copy instead; the call site counts the leaf's code as its own, so the caller's
// checks charge it and the invariant of the checks holds as before: no path runs more than
// segmentBytes of code between two checks, each charging what may run before the next. Such
// a call reads and writes no fuel, so the caller does not spill its fuel local around it,
// and a loop whose calls are all to leaves keeps its fuel in a register and can be
// unrolled. The original keeps its entry charge for every other way in (exports, tables,
// ref.func, the start function), where no caller's check has counted it.

// leafBytes is the most code a leaf's longest path may weigh.
const leafBytes = 256

// leaves are the copied leaves of a module (see above).
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
	r := &reader{b: payload}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	if int64(n) != int64(len(params)) {
		return nil, fmt.Errorf("%d bodies for %d functions", n, len(params))
	}
	lv := &leaves{cost: make([]uint32, n), copyOf: map[uint32]uint32{}}
	called := make([]bool, n)
	srcs := make([][]byte, n)
	s := bodyScratch{segment: 1<<63 - 1, x: x}
	for f := range n {
		size := r.u32()
		src := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", f, r.err)
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
				if c := (&reader{b: src, i: int(in.at) + 1}).u32(); c >= x.yield && c-x.yield < n {
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
	if r.i != len(payload) {
		return nil, fmt.Errorf("%d trailing bytes", len(payload)-r.i)
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
	r := &reader{b: src}
	groups := r.u32()
	var n uint64
	for range groups {
		n += uint64(r.u32())
		if t := r.byte(); !isValType(t) {
			return 0, 0, fmt.Errorf("local of unknown type 0x%02x", t)
		}
	}
	if r.err != nil {
		return 0, 0, fmt.Errorf("locals: %w", r.err)
	}
	return r.i, n, nil
}

// appendLeafCopies appends the bodies of the leaves' copies: each its original with no check
// (a leaf calls nothing, so nothing in it is renumbered but ref.func).
func appendLeafCopies(out []byte, x *fuelIndex, params []uint32, opt instrumentOptions) ([]byte, error) {
	s := bodyScratch{segment: opt.segment, unroll: 1, noChecks: true}
	var body []byte
	for k, f := range x.leaves.copies {
		var err error
		body, err = instrumentBody(body[:0], x.leaves.bodies[k], x, params[f], &s)
		if err != nil {
			return nil, fmt.Errorf("copy of function body %d: %w", f, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out, nil
}

// funcTypes returns the type index of each function of the function section.
func funcTypes(payload []byte) ([]uint32, error) {
	r := &reader{b: payload}
	n := r.u32()
	types := make([]uint32, 0, min(n, uint32(len(payload))))
	for i := uint32(0); i < n && r.err == nil; i++ {
		types = append(types, r.u32())
	}
	return types, r.err
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
