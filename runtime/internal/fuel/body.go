package fuel

import (
	"errors"
	"fmt"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// Kinds of decoded instructions, as far as the control flow goes.
const (
	opPlain uint8 = iota
	opBlock
	opLoop
	opIf
	opElse
	opEnd
	opBr
	opBrIf
	opBrTable
	opExit // return, unreachable, return_call, return_call_indirect
)

// Flags of decoded instructions.
const (
	flagBulk     = 1 << iota // a bulk memory or table operation, or memory.grow
	flagFuncIdx              // call, return_call, ref.func: the immediate is a function index
	flagLeft                 // a block or loop a branch inside a loop leaves by; on its opener and end
	flagSlow                 // a division, remainder or square root
	flagCall                 // call or call_indirect: the fuel local is spilled before, reloaded after
	flagSpill                // leaves the function (return, a tail call, a branch to its label, its end): spilled before
	flagBulkCall             // memory.fill or memory.copy, written as a call to its helper (bulkHelpers)
	flagLeafCall             // a call of a copied leaf (leaf.go): its weight in end
)

// inst is one decoded instruction of a function body.
type inst struct {
	at    uint32 // offset of its opcode in the body
	kind  uint8
	flags uint8
	// end: for block, loop and if, the index of their end; for else, of its if's end; for
	// br_table, the first of its targets in body.targets; for a call of a copied leaf, the
	// leaf's weight in bytes.
	end int32
	// alt: for if, the index of its else or -1; for br and br_if, the index of the block,
	// loop or if they target, -1 for the function's own label; for br_table, the number of
	// targets (the default included).
	alt int32
}

// bodyScratch holds the buffers instrumentBody reuses from one function to the next.
type bodyScratch struct {
	segment uint64 // SegmentBytes, or less in tests
	unroll  int    // UnrollCopies, or 1 (none) in tests
	// testEntries keeps every entry's test (tests: the spec suite's starved world calls
	// yield at every test).
	testEntries bool
	// pad, noChecks and bare are for benchmarks (Options): pad charges of 0
	// without a test at this function's entry; no checks at all; the rewritten code without
	// its checks.
	pad      int
	noChecks bool
	bare     bool
	locals   uint64 // the function's own locals, parameters included: the fuel local's index
	// entryCost is the weight of the code from the entry to the first check after it, or to
	// the function's end (place).
	entryCost uint64
	global    bool // checks on the fuel global, the local a temporary (callFreeLoop)
	calls     bool // the body calls a function (call, call_indirect, tail calls)
	x         *fuelIndex
	insts     []inst
	targets   []int32
	cost      []uint32
	checks    []placedCheck
	ctl       []ctlEntry
}

type ctlEntry struct {
	idx  int32 // the opener's instruction index, -1 for the function
	loop int   // the stack position of the innermost loop at or below this entry, -1 for none
}

type placedCheck struct {
	before   int32 // the instruction it goes in front of
	charge   uint32
	untested bool // the entry's, charging without a test (untestedEntry)
}

// Segment sizes, in bytes of code; see the package doc.
const (
	// SegmentBytes is the most code between two checks on any path (Options.Segment).
	SegmentBytes = 4 << 10
	exitBytes    = 64
	// bulkBytes is what a bulk operation weighs: BulkCharge units.
	bulkBytes = BulkCharge * ChargeBytes
	// slowBytes is what a division, remainder or square root weighs on top of its bytes:
	// one byte of code that takes as long as tens of bytes of other code (a chain of
	// f64.sqrt runs 20 ns a byte against about 1 for multiplications or loads).
	slowBytes = ChargeBytes
)

// slowOp reports whether op (sub, for the 0xfd prefix) is a division, remainder or square
// root, integer, float or SIMD.
func slowOp(op byte, sub uint32) bool {
	switch op {
	case 0x6d, 0x6e, 0x6f, 0x70, 0x7f, 0x80, 0x81, 0x82, 0x91, 0x95, 0x9f, 0xa3:
		return true
	case 0xfd:
		return sub == 227 || sub == 231 || sub == 239 || sub == 243 // f32x4/f64x2 sqrt and div
	}
	return false
}

// chargeFor is what a check covering cost bytes (bulk operations at bulkBytes) charges: one
// unit for the check plus one per ChargeBytes. A check covering a whole allowance or more
// charges exactly Refill, which yields every time it runs (the fuel is an i32 the charge
// must not wrap).
func chargeFor(cost uint64) uint32 {
	return uint32(min(1+cost/ChargeBytes, Refill))
}

// decode reads the instructions of a body whose locals end at offset start.
func (s *bodyScratch) decode(src []byte, start int) error {
	s.insts, s.targets, s.calls = s.insts[:0], s.targets[:0], false
	s.ctl = append(s.ctl[:0], ctlEntry{idx: -1, loop: -1})
	label := func(l uint32) (int32, error) {
		if int64(l) >= int64(len(s.ctl)) {
			return 0, fmt.Errorf("branch depth %d out of range", l)
		}
		t := len(s.ctl) - 1 - int(l)
		// A branch from inside a loop to a block around that loop leaves the loop.
		if e := s.ctl[t]; e.idx >= 0 && s.ctl[len(s.ctl)-1].loop > t {
			s.insts[e.idx].flags |= flagLeft
		}
		return s.ctl[t].idx, nil
	}
	r := &wasmbin.Reader{Buf: src, Pos: start}
	for len(s.ctl) > 0 {
		idx := int32(len(s.insts))
		in := inst{at: uint32(r.Pos), alt: -1}
		op := r.Byte()
		if r.Err != nil {
			return errors.New("missing end of function")
		}
		var err error
		switch op {
		case 0x02, 0x03, 0x04: // block, loop, if
			if r.Pos < len(src) && src[r.Pos] != 0x40 && !wasmbin.IsValType(src[r.Pos]) {
				if t := (&wasmbin.Reader{Buf: src, Pos: r.Pos}).LEB(5); t >= uint64(s.x.types) {
					return fmt.Errorf("block of unknown type %d at offset %d", t, in.at)
				}
			}
			r.BlockType()
			in.kind = [...]uint8{opBlock, opLoop, opIf}[op-0x02]
			loop := s.ctl[len(s.ctl)-1].loop
			if op == 0x03 {
				loop = len(s.ctl)
				in.flags |= flagLeft // falling out of the loop at its end leaves it
			}
			s.ctl = append(s.ctl, ctlEntry{idx: idx, loop: loop})
		case 0x05: // else
			top := s.ctl[len(s.ctl)-1].idx
			if top < 0 || s.insts[top].kind != opIf || s.insts[top].alt >= 0 {
				return fmt.Errorf("else without if at offset %d", in.at)
			}
			in.kind = opElse
			s.insts[top].alt = idx
		case 0x0b: // end
			in.kind = opEnd
			top := s.ctl[len(s.ctl)-1].idx
			s.ctl = s.ctl[:len(s.ctl)-1]
			if top >= 0 {
				o := &s.insts[top]
				o.end = idx
				in.flags = o.flags & flagLeft
				if o.kind == opIf && o.alt >= 0 {
					s.insts[o.alt].end = idx
				}
			} else {
				in.flags = flagSpill // the function's end
			}
		case 0x0c, 0x0d: // br, br_if
			in.kind = opBr
			if op == 0x0d {
				in.kind = opBrIf
			}
			in.alt, err = label(r.U32())
			if in.alt < 0 {
				in.flags |= flagSpill
			}
		case 0x0e: // br_table
			in.kind = opBrTable
			n := r.U32()
			in.end = int32(len(s.targets))
			for i := uint64(0); i <= uint64(n) && r.Err == nil && err == nil; i++ {
				var t int32
				t, err = label(r.U32())
				s.targets = append(s.targets, t)
				if t < 0 {
					in.flags |= flagSpill
				}
			}
			in.alt = int32(len(s.targets)) - in.end
		case 0x00: // unreachable
			in.kind = opExit
		case 0x0f: // return
			in.kind, in.flags = opExit, flagSpill
		default:
			var im wasmbin.Immediates
			sub := (&wasmbin.Reader{Buf: src, Pos: r.Pos}).U32() // the first immediate, if any
			switch {
			case (op == 0x23 || op == 0x24) && sub >= s.x.fuel:
				return fmt.Errorf("unknown global %d at offset %d", sub, in.at)
			case op >= 0x20 && op <= 0x22 && uint64(sub) >= s.locals:
				return fmt.Errorf("unknown local %d at offset %d", sub, in.at)
			case (op == 0x11 || op == 0x13) && sub >= s.x.types:
				return fmt.Errorf("indirect call of unknown type %d at offset %d", sub, in.at)
			}
			if slowOp(op, sub) {
				in.flags |= flagSlow
			}
			im, err = wasmbin.SkipImmediates(r, op)
			switch op {
			case 0x10, 0x11: // call, call_indirect
				if w, ok := s.x.leafCost(sub); ok && op == 0x10 {
					in.flags |= flagLeafCall
					in.end = int32(w)
					break
				}
				in.flags |= flagCall
				s.calls = true
			case 0x12, 0x13: // return_call, return_call_indirect
				in.kind = opExit
				in.flags |= flagSpill
				s.calls = true
			}
			if im.Bulk {
				in.flags |= flagBulk
			}
			if op == 0xfc && (sub == 10 || sub == 11) && s.x.bulk != 0 { // memory.copy, memory.fill
				in.flags |= flagBulkCall | flagCall
				s.calls = true
			}
			if im.FuncIdx {
				in.flags |= flagFuncIdx
			}
		}
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return fmt.Errorf("instruction 0x%02x at offset %d: %w", op, in.at, err)
		}
		s.insts = append(s.insts, in)
	}
	if r.Pos != len(src) {
		return fmt.Errorf("%d bytes after the function's end", len(src)-r.Pos)
	}
	return nil
}

// place computes where the checks go and what they charge (see the package doc), into s.checks from
// the last to the first. bodyEnd is the body's length, where the last instruction ends.
func (s *bodyScratch) place(bodyEnd int) {
	n := len(s.insts)
	if cap(s.cost) < n+1 {
		s.cost = make([]uint32, n+1)
	}
	s.cost = s.cost[:n+1]
	s.cost[n] = 0 // every other entry is written before it is read
	s.checks = s.checks[:0]
	cost, insts := s.cost, s.insts
	// after is the cost from just after the end of the block, loop or if at index o when a
	// branch targets it: a loop's header has a check.
	after := func(o int32) uint64 {
		if o < 0 || insts[o].kind == opLoop {
			return 0
		}
		return uint64(cost[insts[o].end+1])
	}
	next := uint32(bodyEnd)
	for i := n - 1; i >= 0; i-- {
		in := insts[i]
		c := uint64(next - in.at)
		next = in.at
		if in.flags&flagBulk != 0 {
			c += bulkBytes
		}
		if in.flags&flagSlow != 0 {
			c += slowBytes
		}
		if in.flags&flagLeafCall != 0 {
			c += uint64(in.end)
		}
		switch in.kind {
		case opIf:
			alt := in.end // no else: false goes past the end
			if in.alt >= 0 {
				alt = in.alt // into the else arm
			}
			c += max(uint64(cost[i+1]), uint64(cost[alt+1]))
		case opElse: // the then arm is done: past the end
			c += uint64(cost[in.end+1])
		case opBr:
			c += after(in.alt)
		case opBrIf:
			c += max(uint64(cost[i+1]), after(in.alt))
		case opBrTable:
			var m uint64
			for _, t := range s.targets[in.end : in.end+in.alt] {
				m = max(m, after(t))
			}
			c += m
		case opExit:
		default:
			c += uint64(cost[i+1])
		}
		entry := i == 0 || insts[i-1].kind == opLoop
		left := i > 0 && insts[i-1].kind == opEnd && insts[i-1].flags&flagLeft != 0
		if i == 0 {
			s.entryCost = c
		}
		if entry || c > s.segment || left && c > min(exitBytes, s.segment) {
			s.checks = append(s.checks, placedCheck{before: int32(i), charge: chargeFor(c)})
			c = 0
		}
		cost[i] = uint32(min(c, 1<<32-1))
	}
	s.untestedEntry()
}

// untestedEntry drops the test from the entry check, which then only loads the fuel and
// charges,
//
//   - when a loop header's check follows it within exitBytes of straight code (block openers
//     and instructions that neither branch nor call): every call still passes a test, the
//     loop's. Go's functions all start so: their body is one loop around a jump table.
//   - in a function that calls nothing and runs at most exitBytes of code before its next
//     check or its return: such a call cannot recurse, and its caller's code between two
//     tests holds at most SegmentBytes/2 calls, so at most an eighth of an allowance runs
//     untested (C's memchr, called per byte of a Go guest's strings.IndexRune).
func (s *bodyScratch) untestedEntry() {
	n := len(s.checks)
	if s.testEntries {
		return
	}
	if n > 0 && !s.calls && s.checks[n-1].charge <= chargeFor(exitBytes) {
		s.checks[n-1].untested = true
		return
	}
	if n < 2 {
		return
	}
	for j, in := range s.insts {
		switch {
		case in.at-s.insts[0].at > exitBytes:
			return
		case in.kind == opLoop:
			if s.checks[n-2].before == int32(j+1) {
				s.checks[n-1].untested = true
			}
			return
		case in.kind != opBlock && (in.kind != opPlain || in.flags != 0):
			return
		}
	}
}

// instrumentBody appends src, one body (locals and code) of a function with params
// parameters, with the fuel local and checks added and function indices renumbered.
func instrumentBody(out, src []byte, x *fuelIndex, params uint32, s *bodyScratch) ([]byte, error) {
	r := &wasmbin.Reader{Buf: src}
	groups := r.U32()
	start := r.Pos
	code, locals, err := bodyLocals(src)
	if err != nil {
		return nil, err
	}
	fl := uint64(params) + locals
	if fl >= 1<<32-1 {
		return nil, fmt.Errorf("%d locals: no room for the fuel local", fl)
	}
	// The fuel local goes after the function's own: one more group of one i32.
	out = wasmbin.AppendU32(out, groups+1)
	out = append(out, src[start:code]...)
	out = append(out, 0x01, 0x7f)
	s.x, s.locals = x, fl
	if err := s.decode(src, code); err != nil {
		return nil, err
	}
	s.place(len(src))
	s.global = !s.callFreeLoop() || s.bare // bare: global mode writes no spills or reloads
	if s.noChecks {
		s.checks, s.global = s.checks[:0], true
	}
	return s.emit(out, src, uint32(fl)), nil
}
