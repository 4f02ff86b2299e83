package runtime

import (
	"errors"
	"fmt"
	"strings"
)

// The time limit without wazero's close-on-context-done. That option (wazero 1.12) starts a
// watchdog goroutine per call and makes compiled code leave for Go at every loop back-edge
// (wazero issue #2466), which made CPU-bound guests several times slower. Instead a module
// is instrumented once at load with a fuel counter: one mutable i32 global, charged at every
// function entry and loop header,
//
//	global.get $fuel
//	i32.const  <charge>
//	i32.sub
//	global.set $fuel
//	global.get $fuel
//	i32.const  0
//	i32.lt_s
//	if
//	  call $yield   ;; the host: ends the call if its time is up, else refills the fuel
//	  global.set $fuel
//	end
//
// which compiles to a few loads, a subtraction and a branch. When the fuel runs out the guest
// calls the host's yield function (an import the instrumenter adds), which traps the call
// when its time limit has passed or its caller's context has ended, and otherwise returns a
// new allowance.
//
// Why a call into Go rather than a flag the host sets: compiled guest code cannot be
// preempted by the Go scheduler. With as many spinning guests as GOMAXPROCS, no goroutine,
// timer or AfterFunc would ever run again to set a flag (wazero's own check leaves for Go at
// every loop iteration for the same reason). The yield call gives the scheduler a point to
// preempt the goroutine, every fuelRefill units at most.
//
// A charge is 1 plus one unit per chargeBytes bytes of the code it covers (the function's or
// the loop's body, capped at maxCharge) plus bulkCharge per bulk memory operation in it, so
// a guest returns to the host after about fuelRefill small loop iterations (tens of µs) and
// after a bounded amount of straight-line code or bulk memory work however its loops are
// shaped. A module the decoder below cannot read is left as it is and runs under
// close-on-context-done as before.

// Instrumentation constants; see above.
const (
	fuelRefill  = 1 << 15
	chargeBytes = 32
	maxCharge   = 64
	bulkCharge  = 1024
	// instrumentVersion names the cached instrumented modules: raise it with any change
	// to what instrument writes.
	instrumentVersion = 2
	// yieldImport is the host function the instrumented code calls (module hostModuleName).
	yieldImport = "wqhost_yield"
)

// yieldCode is a module instrumented with a fuel counter.
type yieldCode struct {
	wasm []byte
}

// errUndecodable marks a module the instrumenter does not understand.
var errUndecodable = errors.New("fuel: cannot instrument module")

// Section ids of the core binary format.
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElem     = 9
	secCode     = 10
	secTag      = 13
	maxSectorID = 13
)

// sectionRank is the order non-custom sections must appear in.
var sectionRank = [maxSectorID + 1]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

type section struct {
	id      byte
	payload []byte
}

// instrument returns wasm with the fuel counter added (see above), or an error wrapping
// errUndecodable for anything it cannot decode. The yield import goes last among the
// imported functions, so every defined function's index moves up by one: calls, ref.func,
// exports, the start function, element segments and the name section are renumbered. It
// drops DWARF and source-map custom sections, whose code offsets the inserted checks would
// make wrong.
func instrument(wasm []byte) (*yieldCode, error) {
	fail := func(format string, args ...any) (*yieldCode, error) {
		return nil, fmt.Errorf("%w: %s", errUndecodable, fmt.Sprintf(format, args...))
	}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return fail("not a core wasm module")
	}
	var secs []section
	r := &reader{b: wasm, i: 8}
	lastRank := 0
	for r.i < len(r.b) {
		id := r.byte()
		n := r.u32()
		payload := r.bytes(int(n))
		if r.err != nil {
			return fail("section header at offset %d: %v", r.i, r.err)
		}
		if id > maxSectorID || id != secCustom && sectionRank[id] == 0 {
			return fail("unknown section id %d", id)
		}
		if id != secCustom {
			if sectionRank[id] <= lastRank {
				return fail("section %d out of order", id)
			}
			lastRank = sectionRank[id]
		}
		secs = append(secs, section{id, payload})
	}

	var types, importedFuncs, importedGlobals, definedGlobals uint32
	for _, s := range secs {
		switch s.id {
		case secType:
			n, err := countFuncTypes(s.payload)
			if err != nil {
				return fail("type section: %v", err)
			}
			types = n
		case secImport:
			f, g, err := countImports(s.payload)
			if err != nil {
				return fail("import section: %v", err)
			}
			importedFuncs, importedGlobals = f, g
		case secGlobal:
			r := &reader{b: s.payload}
			definedGlobals = r.u32()
			if r.err != nil {
				return fail("global section: %v", r.err)
			}
		case secTag:
			return fail("exception tags are not supported")
		}
	}
	x := &fuelIndex{fuel: importedGlobals + definedGlobals, yield: importedFuncs}

	out := make([]byte, 0, len(wasm)+len(wasm)/8+64)
	out = append(out, wasm[:8]...)
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(payload)))
		out = append(out, payload...)
	}
	// Sections the instrumenter adds to when present, or creates when absent, in rank order.
	added := map[byte]bool{}
	add := map[byte]func([]byte) ([]byte, error){
		secType: func(p []byte) ([]byte, error) {
			return appendVec(p, types, []byte{0x60, 0x00, 0x01, 0x7f}), nil // () -> i32
		},
		secImport: func(p []byte) ([]byte, error) {
			var n uint32
			if p != nil {
				n, _, _ = countImports(p)
			}
			e := appendName(nil, hostModuleName)
			e = appendName(e, yieldImport)
			e = append(e, 0x00)
			e = appendU32(e, types)
			return appendVec(p, n, e), nil
		},
		secGlobal: func(p []byte) ([]byte, error) {
			g := append([]byte{0x7f, 0x01, 0x41}, appendS32(nil, fuelRefill)...) // mut i32 = fuelRefill
			if p != nil {
				var err error
				if p, err = remapGlobals(p, x); err != nil {
					return nil, err
				}
			}
			return appendVec(p, definedGlobals, append(g, 0x0b)), nil
		},
	}
	flush := func(rank int) {
		for _, id := range []byte{secType, secImport, secGlobal} {
			if !added[id] && rank > sectionRank[id] {
				p, _ := add[id](nil)
				emit(id, p)
				added[id] = true
			}
		}
	}
	for _, s := range secs {
		if s.id == secCustom {
			r := &reader{b: s.payload}
			name := r.name()
			if r.err != nil {
				return fail("custom section name: %v", r.err)
			}
			switch {
			case strings.HasPrefix(name, ".debug_") || name == "sourceMappingURL" || name == "external_debug_info":
				continue
			case name == "name":
				p, err := remapNames(s.payload, r.i, x)
				if err != nil {
					// Names are for stack traces only: a section we cannot read is dropped.
					continue
				}
				emit(s.id, p)
				continue
			}
			emit(s.id, s.payload)
			continue
		}
		flush(sectionRank[s.id])
		var p []byte
		var err error
		switch s.id {
		case secType, secImport, secGlobal:
			p, err = add[s.id](s.payload)
			added[s.id] = true
		case secExport:
			p, err = remapExports(s.payload, x)
		case secStart:
			r := &reader{b: s.payload}
			p = appendU32(nil, x.fn(r.u32()))
			err = r.err
		case secElem:
			p, err = remapElems(s.payload, x)
		case secCode:
			p, err = instrumentCode(s.payload, x)
		default:
			p = s.payload
		}
		if err != nil {
			return fail("section %d: %v", s.id, err)
		}
		emit(s.id, p)
	}
	flush(maxInt)
	return &yieldCode{wasm: out}, nil
}

const maxInt = int(^uint(0) >> 1)

// fuelIndex holds the indices the instrumented code refers to.
type fuelIndex struct {
	fuel  uint32 // the fuel global
	yield uint32 // the yield import; defined functions at or above it move up by one
}

// fn maps an original function index to the instrumented module's.
func (x *fuelIndex) fn(i uint32) uint32 {
	if i >= x.yield {
		return i + 1
	}
	return i
}

// appendCheck appends the fuel check (see above) with the given charge. The charge is
// written as a 5-byte LEB128 so a loop's can be patched in once its end is known.
func (x *fuelIndex) appendCheck(b []byte, charge uint32) []byte {
	b = append(b, 0x23)
	b = appendU32(b, x.fuel)
	b = append(b, 0x41)
	b = appendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x24) // i32.sub, global.set
	b = appendU32(b, x.fuel)
	b = append(b, 0x23)
	b = appendU32(b, x.fuel)
	b = append(b, 0x41, 0x00, 0x48, 0x04, 0x40, 0x10) // i32.const 0, i32.lt_s, if, call
	b = appendU32(b, x.yield)
	b = append(b, 0x24) // global.set
	b = appendU32(b, x.fuel)
	return append(b, 0x0b)
}

// chargeOffset is where appendCheck put its charge, counted back from the check's end:
// after global.get $fuel and the i32.const opcode.
func (x *fuelIndex) chargeOffset() int {
	return len(x.appendCheck(nil, 0)) - (2 + uleb32Len(x.fuel))
}

// charge is what a check covering bytes of code with bulk bulk memory operations costs; at
// most fuelRefill (which yields every time), so no count of bulk operations can overflow it.
func charge(bytes, bulk int) uint32 {
	return uint32(min(1+min(bytes/chargeBytes, maxCharge)+min(bulk, fuelRefill/bulkCharge)*bulkCharge, fuelRefill))
}

func instrumentCode(payload []byte, x *fuelIndex) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	out := make([]byte, 0, len(payload)+len(payload)/4+16)
	out = appendU32(out, n)
	var body []byte
	for f := range n {
		size := r.u32()
		src := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", f, r.err)
		}
		var err error
		body, err = instrumentBody(body[:0], src, x)
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", f, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.i != len(payload) {
		return nil, fmt.Errorf("%d trailing bytes", len(payload)-r.i)
	}
	return out, nil
}

// block is an open block, loop or if while a body is instrumented.
type block struct {
	loop  bool
	src   int // the loop's first instruction in the source
	patch int // where the loop's charge goes in the output
	bulk  int // bulk memory operations inside
}

func instrumentBody(out, src []byte, x *fuelIndex) ([]byte, error) {
	r := &reader{b: src}
	groups := r.u32()
	for range groups {
		r.u32()
		if t := r.byte(); !isValType(t) {
			return nil, fmt.Errorf("local of unknown type 0x%02x", t)
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("locals: %w", r.err)
	}
	out = append(out, src[:r.i]...)
	out = x.appendCheck(out, 0)
	entryPatch := len(out) - x.chargeOffset()
	off := x.chargeOffset()
	stack := []block{{src: r.i}} // the function body's own block
	for len(stack) > 0 {
		at := r.i
		op := r.byte()
		if r.err != nil {
			return nil, fmt.Errorf("missing end of function")
		}
		im, err := skipImmediates(r, op)
		if err != nil {
			return nil, fmt.Errorf("instruction 0x%02x at offset %d: %w", op, at, err)
		}
		switch {
		case im.funcIdx:
			// call, return_call, ref.func: the one immediate is a function index.
			out = append(out, op)
			out = appendU32(out, x.fn(im.idx))
		default:
			out = append(out, src[at:r.i]...)
		}
		if im.bulk {
			for i := range stack {
				stack[i].bulk++
			}
		}
		switch op {
		case 0x02, 0x04: // block, if
			stack = append(stack, block{})
		case 0x03: // loop
			out = x.appendCheck(out, 0)
			stack = append(stack, block{loop: true, src: r.i, patch: len(out) - off})
		case 0x0b: // end
			b := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if b.loop {
				patchS32(out[b.patch:], int32(charge(r.i-b.src, b.bulk)))
			}
			if len(stack) == 0 {
				patchS32(out[entryPatch:], int32(charge(r.i-b.src, b.bulk)))
			}
		}
	}
	if r.i != len(src) {
		return nil, fmt.Errorf("%d bytes after the function's end", len(src)-r.i)
	}
	return out, nil
}

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

// countFuncTypes returns the number of types, refusing anything but plain function types
// (the GC proposal's recursive and sub types would need a different encoding of the new one).
func countFuncTypes(payload []byte) (uint32, error) {
	r := &reader{b: payload}
	n := r.u32()
	for range n {
		if f := r.byte(); f != 0x60 {
			r.fail(fmt.Errorf("type form 0x%02x", f))
		}
		for range 2 { // params, results
			for range r.u32() {
				if t := r.byte(); !isValType(t) {
					r.fail(fmt.Errorf("value of unknown type 0x%02x", t))
				}
			}
		}
		if r.err != nil {
			return 0, r.err
		}
	}
	if r.err == nil && r.i != len(payload) {
		r.fail(errors.New("trailing bytes"))
	}
	return n, r.err
}

// countImports returns the numbers of imported functions and globals.
func countImports(payload []byte) (funcs, globals uint32, err error) {
	r := &reader{b: payload}
	n := r.u32()
	for range n {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // func
			r.u32()
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
			return 0, 0, r.err
		}
	}
	if r.err == nil && r.i != len(payload) {
		r.fail(errors.New("trailing bytes"))
	}
	return funcs, globals, r.err
}

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
	for range n {
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
	for range n {
		out = appendName(out, r.name())
		kind := r.byte()
		idx := r.u32()
		if kind == 0x00 {
			idx = x.fn(idx)
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
	for range n {
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
		for range count {
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
// local and label names); the others are kept as they are. at is where the subsections
// start in payload, after the section's own name.
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
		p := appendU32(nil, n)
		for range n {
			p = appendU32(p, x.fn(sr.u32()))
			if id == 1 {
				p = appendName(p, sr.name())
				continue
			}
			m := sr.u32()
			p = appendU32(p, m)
			for range m {
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
		out = append(out, id)
		out = appendU32(out, uint32(len(p)))
		out = append(out, p...)
	}
	return out, r.err
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

func uleb32Len(v uint32) int {
	return len(appendU32(nil, v))
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
