package fuel

import "github.com/wqhost/wqhost/runtime/internal/wasmbin"

// Unrolling constants; see the package doc. A loop body of n bytes gets unrollTarget/n copies, at
// least UnrollCopies (the option: 1 in tests turns unrolling off) and at most
// maxUnrollCopies: the smaller the body, the more a test weighs against it (a counting
// loop of two instructions a pass cost 1.45× its unrolled code in instructions with four
// copies, 1.1× with sixteen).
const (
	// UnrollCopies is the fewest copies of an unrolled loop's body (Options.Unroll).
	UnrollCopies    = 4
	maxUnrollCopies = 32
	unrollTarget    = 512
	unrollBytes     = 128
)

// emit appends the body's instructions with the checks s.checks holds (from the last to the
// first), on the fuel local fl.
func (s *bodyScratch) emit(out, src []byte, fl uint32) []byte {
	k := len(s.checks) - 1
	budget := len(src) + (maxUnrollCopies-1)*unrollBytes // what unrolling may add
	for range s.pad {
		out = s.x.appendGlobalCharge(out, 0)
	}
	for i := 0; i < len(s.insts); i++ {
		if k >= 0 && s.checks[k].before == int32(i) {
			switch c := s.checks[k]; {
			case s.bare:
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
			n := s.unrollable(src, i, k)
			copies := s.unroll
			if n > 0 {
				copies = min(max(unrollTarget/n, s.unroll), maxUnrollCopies)
			}
			if n > 0 && n*(copies-1) <= budget {
				budget -= n * (copies - 1)
				out, k = s.emitUnrolled(out, src, i, k, fl, copies)
				i = int(s.insts[i].end)
				continue
			}
		}
		out = s.emitInst(out, src, i, fl, -1, 0)
	}
	return out
}

// unrollable returns the size of the body of the loop at h if it can be unrolled (see the package doc),
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

// emitUnrolled appends the loop at h unrolled (see the package doc), its header check being
// s.checks[k], and returns the index of the next check to write.
func (s *bodyScratch) emitUnrolled(out, src []byte, h, k int, fl uint32, copies int) ([]byte, int) {
	e := int(s.insts[h].end)
	// around is the labels added around the loop: $exit, and with checks $re and $slow.
	around := uint32(1)
	out = append(out, 0x02, 0x40) // block $exit
	if !s.bare {
		out = append(out, 0x03, 0x40, 0x02, 0x40) // loop $re, block $slow
		around = 3
	}
	out = append(out, src[s.insts[h].at:s.insts[h+1].at]...) // loop and its block type
	pass := s.checks[k].charge
	charge := min(pass*uint32(copies), Refill)
	pass = charge / uint32(copies) // what a pass pays of the group's charge, for the refunds
	switch {
	case s.bare:
	case s.global:
		out = s.x.appendGlobalFastCheck(out, fl, charge)
	default:
		out = s.x.appendFastCheck(out, fl, charge)
	}
	k--
	for c := range copies {
		last := c == copies-1
		shift := around
		if !last {
			out = append(out, 0x02, 0x40) // block
			shift++
		}
		for j := h + 1; j < e; j++ {
			out = s.emitInst(out, src, j, fl, int32(h), shift)
		}
		if !last {
			// Falling off this pass's body leaves the loop: the passes of the group it did
			// not run are given back, so a loop that runs fewer passes than a group and
			// leaves by its end is charged what it ran (a branch out is not).
			if refund := pass * uint32(copies-1-c); !s.bare {
				if s.global {
					out = s.x.appendGlobalCharge(out, -refund)
				} else {
					out = s.x.appendLocalCharge(out, fl, -refund)
				}
			}
			out = append(out, 0x0c) // br $exit
			out = wasmbin.AppendU32(out, around+1)
			out = append(out, 0x0b) // end
		}
	}
	out = s.emitInst(out, src, e, fl, -1, 0) // the loop's end
	if !s.bare {
		// Out of the loop: on to $exit past the yield; out of fuel: yield, then run the
		// loop's header again (nothing is on the stack there: the block type is empty).
		out = append(out, 0x0c, 0x02, 0x0b, 0x10) // br $exit, end $slow, call
		out = wasmbin.AppendU32(out, s.x.yield)
		// The header charges again: the allowance plus that charge, so the group costs
		// what a check's group does (the yield forgives what it took below zero).
		out = append(out, 0x41)
		out = wasmbin.AppendS32(out, int32(charge))
		out = append(out, 0x6a) // i32.add
		if s.global {
			out = append(out, 0x24) // global.set
			out = wasmbin.AppendU32(out, s.x.fuel)
		} else {
			out = append(out, 0x21) // local.set
			out = wasmbin.AppendU32(out, fl)
		}
		out = append(out, 0x0c, 0x00, 0x0b) // br $re, end $re
	}
	return append(out, 0x0b), k // $exit's end
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
	r := &wasmbin.Reader{Buf: src, Pos: int(in.at) + 1}
	switch {
	case in.flags&flagBulkCall != 0:
		f := s.x.bulk // memory.fill's helper; memory.copy's is next
		if r.U32() == 10 {
			f++
		}
		out = wasmbin.AppendU32(append(out, 0x10), f)
	case in.flags&flagLeafCall != 0:
		out = wasmbin.AppendU32(append(out, 0x10), s.x.leaves.copyOf[r.U32()-s.x.yield])
	case in.flags&flagFuncIdx != 0:
		out = wasmbin.AppendU32(append(out, src[in.at]), s.x.fn(r.U32()))
	case shift != 0 && (in.kind == opBr || in.kind == opBrIf || in.kind == opBrTable):
		out = append(out, src[in.at])
		label := func(t int32) {
			l := r.U32()
			if t < h { // the function's label (-1) or a block opened before the loop
				l += shift
			}
			out = wasmbin.AppendU32(out, l)
		}
		if in.kind == opBrTable {
			out = wasmbin.AppendU32(out, r.U32())
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
