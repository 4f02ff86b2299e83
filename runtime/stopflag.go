package runtime

import (
	"errors"
	"fmt"
	"strings"
)

// The time limit without wazero's close-on-context-done. That option (wazero 1.12) starts a
// watchdog goroutine per call and makes compiled code leave for Go at every loop back-edge
// (wazero issue #2466), which made CPU-bound guests several times slower. Instead a module
// is instrumented once at load: it gets one mutable i32 global, the stop flag, and every
// function entry and loop header tests it,
//
//	global.get $stop
//	if
//	  unreachable
//	end
//
// which compiles to a load and a branch. The pool sets the flag (api.MutableGlobal) when the
// time limit or the caller's context ends the call; the guest then traps at its next loop
// iteration or call, and the pool reports the time limit. A module the decoder below cannot
// read is left as it is and runs under close-on-context-done as before.

// Export names the instrumenter adds; a module already using one is not instrumented.
const (
	stopExport  = "wqhost.stop"
	startExport = "wqhost.start"
)

// stopCode is a module instrumented with a stop flag.
type stopCode struct {
	wasm []byte
	// start: the module's start section was turned into the startExport export, so the
	// pool runs it after instantiation, once the stop flag can be reached.
	start bool
}

// errUndecodable marks a module the instrumenter does not understand.
var errUndecodable = errors.New("stop flag: cannot instrument module")

// Section ids of the core binary format.
const (
	secCustom   = 0
	secImport   = 2
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
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

// instrumentStop returns wasm with the stop flag added (see above), or an error wrapping
// errUndecodable for anything it cannot decode. It drops DWARF and source-map custom
// sections, whose code offsets the inserted checks would make wrong; the name section stays.
func instrumentStop(wasm []byte) (*stopCode, error) {
	fail := func(format string, args ...any) (*stopCode, error) {
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

	var importedGlobals, definedGlobals uint32
	start := int64(-1)
	for _, s := range secs {
		switch s.id {
		case secImport:
			n, err := countImportedGlobals(s.payload)
			if err != nil {
				return fail("import section: %v", err)
			}
			importedGlobals = n
		case secGlobal:
			r := &reader{b: s.payload}
			definedGlobals = r.u32()
			if r.err != nil {
				return fail("global section: %v", r.err)
			}
		case secExport:
			names, err := exportNames(s.payload)
			if err != nil {
				return fail("export section: %v", err)
			}
			for _, n := range names {
				if n == stopExport || n == startExport {
					return fail("module already exports %q", n)
				}
			}
		case secStart:
			r := &reader{b: s.payload}
			start = int64(r.u32())
			if r.err != nil {
				return fail("start section: %v", r.err)
			}
		case secTag:
			return fail("exception tags are not supported")
		}
	}
	stopIdx := importedGlobals + definedGlobals

	out := make([]byte, 0, len(wasm)+len(wasm)/16+64)
	out = append(out, wasm[:8]...)
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(payload)))
		out = append(out, payload...)
	}
	globalDone, exportDone := false, false
	newGlobal := func(payload []byte) []byte {
		var p []byte
		rest := payload
		if payload != nil {
			r := &reader{b: payload}
			r.u32()
			rest = payload[r.i:]
		}
		p = appendU32(p, definedGlobals+1)
		p = append(p, rest...)
		return append(p, 0x7f, 0x01, 0x41, 0x00, 0x0b) // mut i32 = i32.const 0
	}
	newExport := func(payload []byte) []byte {
		var count uint32
		var rest []byte
		if payload != nil {
			r := &reader{b: payload}
			count = r.u32()
			rest = payload[r.i:]
		}
		extra := uint32(1)
		if start >= 0 {
			extra++
		}
		p := appendU32(nil, count+extra)
		p = append(p, rest...)
		p = appendName(p, stopExport)
		p = append(p, 0x03)
		p = appendU32(p, stopIdx)
		if start >= 0 {
			p = appendName(p, startExport)
			p = append(p, 0x00)
			p = appendU32(p, uint32(start))
		}
		return p
	}
	flush := func(rank int) {
		if !globalDone && rank > sectionRank[secGlobal] {
			emit(secGlobal, newGlobal(nil))
			globalDone = true
		}
		if !exportDone && rank > sectionRank[secExport] {
			emit(secExport, newExport(nil))
			exportDone = true
		}
	}
	for _, s := range secs {
		if s.id == secCustom {
			r := &reader{b: s.payload}
			name := r.name()
			if r.err != nil {
				return fail("custom section name: %v", r.err)
			}
			if strings.HasPrefix(name, ".debug_") || name == "sourceMappingURL" || name == "external_debug_info" {
				continue
			}
			emit(s.id, s.payload)
			continue
		}
		flush(sectionRank[s.id])
		switch s.id {
		case secGlobal:
			emit(secGlobal, newGlobal(s.payload))
			globalDone = true
		case secExport:
			emit(secExport, newExport(s.payload))
			exportDone = true
		case secStart:
			// Exported under startExport instead; the pool calls it.
		case secCode:
			code, err := instrumentCode(s.payload, stopIdx)
			if err != nil {
				return fail("code section: %v", err)
			}
			emit(secCode, code)
		default:
			emit(s.id, s.payload)
		}
	}
	flush(maxInt)
	return &stopCode{wasm: out, start: start >= 0}, nil
}

const maxInt = int(^uint(0) >> 1)

// stopCheck is the check inserted at function entries and loop headers.
func appendStopCheck(b []byte, stopIdx uint32) []byte {
	b = append(b, 0x23) // global.get
	b = appendU32(b, stopIdx)
	return append(b, 0x04, 0x40, 0x00, 0x0b) // if (empty) unreachable end
}

func instrumentCode(payload []byte, stopIdx uint32) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	out := make([]byte, 0, len(payload)+len(payload)/8+16)
	out = appendU32(out, n)
	var body []byte
	for f := range n {
		size := r.u32()
		src := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", f, r.err)
		}
		var err error
		body, err = instrumentBody(body[:0], src, stopIdx)
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

func instrumentBody(out, src []byte, stopIdx uint32) ([]byte, error) {
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
	out = appendStopCheck(out, stopIdx)
	depth := 1 // the function body's own block
	for {
		at := r.i
		op := r.byte()
		if r.err != nil {
			return nil, fmt.Errorf("missing end of function")
		}
		loop, err := skipImmediates(r, op)
		if err != nil {
			return nil, fmt.Errorf("instruction 0x%02x at offset %d: %w", op, at, err)
		}
		out = append(out, src[at:r.i]...)
		switch op {
		case 0x02, 0x03, 0x04: // block, loop, if
			depth++
		case 0x0b: // end
			depth--
		}
		if loop {
			out = appendStopCheck(out, stopIdx)
		}
		if depth == 0 {
			break
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

// skipImmediates advances r past op's immediates and reports whether op is a loop. It knows
// the instructions of WebAssembly 2.0 (sign extension, saturating conversions, bulk memory,
// reference types, multi-value, SIMD), tail calls, threads' atomics and multiple memories;
// anything else (exceptions, GC, relaxed SIMD...) is an error.
func skipImmediates(r *reader, op byte) (loop bool, err error) {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		op >= 0x45 && op <= 0xc4 || op == 0xd1:
		// no immediates
	case op == 0x02 || op == 0x03 || op == 0x04:
		r.blockType()
		loop = op == 0x03
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || op >= 0x20 && op <= 0x26 ||
		op == 0x3f || op == 0x40 || op == 0xd2:
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
				return false, fmt.Errorf("select of unknown type 0x%02x", t)
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
			return false, fmt.Errorf("ref.null of unknown type 0x%02x", t)
		}
	case op == 0xfc:
		sub := r.u32()
		switch {
		case sub <= 7:
		case sub == 9 || sub == 11 || sub == 13 || sub >= 15 && sub <= 17:
			r.u32()
		case sub == 8 || sub == 10 || sub == 12 || sub == 14:
			r.u32()
			r.u32()
		default:
			return false, fmt.Errorf("unknown 0xfc sub-opcode %d", sub)
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
			return false, fmt.Errorf("unknown SIMD sub-opcode %d", sub)
		}
	case op == 0xfe:
		sub := r.u32()
		switch {
		case sub == 3:
			r.bytes(1)
		case sub <= 0x4e:
			r.memarg()
		default:
			return false, fmt.Errorf("unknown atomic sub-opcode %d", sub)
		}
	default:
		return false, fmt.Errorf("unknown opcode")
	}
	return loop, r.err
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

func countImportedGlobals(payload []byte) (uint32, error) {
	r := &reader{b: payload}
	n := r.u32()
	var globals uint32
	for range n {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // func
			r.u32()
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
			return 0, r.err
		}
	}
	if r.err == nil && r.i != len(payload) {
		r.fail(errors.New("trailing bytes"))
	}
	return globals, r.err
}

func exportNames(payload []byte) ([]string, error) {
	r := &reader{b: payload}
	n := r.u32()
	var names []string
	for range n {
		names = append(names, r.name())
		r.byte()
		r.u32()
		if r.err != nil {
			return nil, r.err
		}
	}
	if r.err == nil && r.i != len(payload) {
		r.fail(errors.New("trailing bytes"))
	}
	return names, r.err
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
