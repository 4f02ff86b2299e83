package runtime

// Writing an instrumented body: the checks place (instrument_body.go) put, the spills and
// reloads of the fuel local, and small loops unrolled.
//
// Unrolling. A check is a subtraction and a branch not taken, which in a loop of a few
// instructions costs as much again as the loop itself (a counting loop ran 2.0× with a
// check per pass). So an innermost loop whose body is small (unrollBytes of code at most, no
// check inside it but its header's, at least one branch back to it, no parameters or
// results) runs unrollCopies passes per check, written out one after the other:
//
//	block              ;; $exit, added
//	  loop             ;; the original loop
//	    check          ;; its header's check, charging C (one pass)
//	    block          ;; the first pass: a branch to the loop goes on to the next pass
//	      body         ;; branches out of the loop one label further (two in all)
//	      br $exit     ;; falling off the body's end leaves the loop, as it did
//	    end
//	    charge         ;; the fuel local less C, without a test
//	    block ... end  ;; the second and third passes, likewise
//	    charge
//	    body           ;; the last pass as it was (branches out of the loop one further)
//	  end
//	end
//
// Each pass is charged what the header's check charges for one, so the fuel used is the
// same as without unrolling; only the test comes once every unrollCopies passes, which
// lets the fuel run below zero by at most unrollCopies-1 passes of a small body before the
// next check yields. What unrolling adds to a function is at most the function's own size
// plus one largest loop's copies, so a module's code grows by a bounded factor, as with the
// checks themselves.

// Unrolling constants; see above.
const (
	unrollCopies = 4
	unrollBytes  = 128
)

// emit appends the body's instructions with the checks s.checks holds (from the last to the
// first), on the fuel local fl.
func (s *bodyScratch) emit(out, src []byte, fl uint32) []byte {
	k := len(s.checks) - 1
	budget := len(src) + (s.unroll-1)*unrollBytes // what unrolling may add
	for i := 0; i < len(s.insts); i++ {
		if k >= 0 && s.checks[k].before == int32(i) {
			switch c := s.checks[k]; {
			case s.global && c.untested:
				out = s.x.appendGlobalCharge(out, c.charge)
			case s.global:
				out = s.x.appendGlobalCheck(out, fl, c.charge)
			case c.untested:
				out = s.x.appendEntryCharge(out, fl, c.charge)
			default:
				out = s.x.appendCheck(out, fl, c.charge, i == 0)
			}
			k--
		}
		if s.insts[i].kind == opLoop && s.unroll > 1 {
			if n := s.unrollable(src, i, k); n > 0 && n*(s.unroll-1) <= budget {
				budget -= n * (s.unroll - 1)
				out, k = s.emitUnrolled(out, src, i, k, fl)
				i = int(s.insts[i].end)
				continue
			}
		}
		out = s.emitInst(out, src, i, fl, -1, 0)
	}
	return out
}

// unrollable returns the size of the body of the loop at h if it can be unrolled (see above),
// else 0. s.checks[k] is the next check to write.
func (s *bodyScratch) unrollable(src []byte, h, k int) int {
	lp := s.insts[h]
	e := int(lp.end)
	switch {
	case src[lp.at+1] != 0x40: // block type: not empty
		return 0
	case k < 0 || s.checks[k].before != int32(h+1): // no header check (cannot happen)
		return 0
	case k >= 1 && s.checks[k-1].before <= int32(e): // another check inside
		return 0
	}
	n := int(s.insts[e].at - s.insts[h+1].at)
	if n > unrollBytes {
		return 0
	}
	back := false
	for _, in := range s.insts[h+1 : e] {
		switch in.kind {
		case opLoop:
			return 0
		case opBr, opBrIf:
			back = back || in.alt == int32(h)
		case opBrTable:
			for _, t := range s.targets[in.end : in.end+in.alt] {
				back = back || t == int32(h)
			}
		}
	}
	if !back {
		return 0
	}
	return n
}

// emitUnrolled appends the loop at h unrolled (see above), its header check being
// s.checks[k], and returns the index of the next check to write.
func (s *bodyScratch) emitUnrolled(out, src []byte, h, k int, fl uint32) ([]byte, int) {
	e := int(s.insts[h].end)
	out = append(out, 0x02, 0x40)                            // block $exit
	out = append(out, src[s.insts[h].at:s.insts[h+1].at]...) // loop and its block type
	charge := s.checks[k].charge
	if s.global {
		out = s.x.appendGlobalCheck(out, fl, charge)
	} else {
		out = s.x.appendCheck(out, fl, charge, false)
	}
	k--
	for c := range s.unroll {
		last := c == s.unroll-1
		switch {
		case c > 0 && s.global:
			out = s.x.appendGlobalCharge(out, charge)
		case c > 0:
			out = s.x.appendCharge(out, fl, charge)
		}
		shift := uint32(1)
		if !last {
			out = append(out, 0x02, 0x40) // block
			shift = 2
		}
		for j := h + 1; j < e; j++ {
			out = s.emitInst(out, src, j, fl, int32(h), shift)
		}
		if !last {
			out = append(out, 0x0c, 0x02, 0x0b) // br $exit, end
		}
	}
	out = s.emitInst(out, src, e, fl, -1, 0) // the loop's end
	return append(out, 0x0b), k              // $exit's end
}

// emitInst appends instruction i with the fuel local's spill before and reload after it
// where it calls or leaves the function. A branch to a label around the loop at h (an
// instruction index) has shift added to its depth.
func (s *bodyScratch) emitInst(out, src []byte, i int, fl uint32, h int32, shift uint32) []byte {
	in := s.insts[i]
	if in.flags&(flagCall|flagSpill) != 0 && !s.global {
		out = s.x.appendSpill(out, fl)
	}
	end := len(src)
	if i+1 < len(s.insts) {
		end = int(s.insts[i+1].at)
	}
	r := &reader{b: src, i: int(in.at) + 1}
	switch {
	case in.flags&flagBulkCall != 0:
		f := s.x.bulk // memory.fill's helper; memory.copy's is next
		if r.u32() == 10 {
			f++
		}
		out = appendU32(append(out, 0x10), f)
	case in.flags&flagFuncIdx != 0:
		out = appendU32(append(out, src[in.at]), s.x.fn(r.u32()))
	case shift != 0 && (in.kind == opBr || in.kind == opBrIf || in.kind == opBrTable):
		out = append(out, src[in.at])
		label := func(t int32) {
			l := r.u32()
			if t < h { // the function's label (-1) or a block opened before the loop
				l += shift
			}
			out = appendU32(out, l)
		}
		if in.kind == opBrTable {
			out = appendU32(out, r.u32())
			for _, t := range s.targets[in.end : in.end+in.alt] {
				label(t)
			}
		} else {
			label(in.alt)
		}
	default:
		out = append(out, src[in.at:end]...)
	}
	if in.flags&flagCall != 0 && !s.global {
		out = s.x.appendReload(out, fl)
	}
	return out
}

// callFreeLoop reports whether a loop of the body has no call in it, where keeping the fuel
// in a local pays; where every loop calls, the fuel would go through the global at each call
// anyway, and the checks use the global itself (global mode). A loop without a call has an
// innermost one, and innermost loops do not overlap: one pass.
func (s *bodyScratch) callFreeLoop() bool {
	for h, lp := range s.insts {
		if lp.kind != opLoop {
			continue
		}
		free := true
		for _, in := range s.insts[h+1 : lp.end] {
			if in.kind == opLoop || in.flags&flagCall != 0 {
				free = in.kind == opLoop && free
				break
			}
		}
		if free {
			return true
		}
	}
	return false
}
