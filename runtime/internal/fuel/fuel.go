package fuel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// Instrumentation constants; see the package doc.
const (
	// Refill is the fuel an instance starts with and the allowance the yield function
	// returns: about Refill small loop passes or Refill*ChargeBytes bytes of straight code.
	Refill = 1 << 15
	// ChargeBytes is the bytes of code one unit of fuel pays for.
	ChargeBytes = 32
	// BulkCharge is the constant charge of a bulk memory or table operation, or
	// memory.grow, on top of memory.fill's and memory.copy's charge by length (BulkShift).
	BulkCharge = 1024
	// Version names the cached instrumented modules: raise it with any change
	// to what Instrument writes.
	Version = 9
	// YieldModule and YieldImport name the host function the instrumented code calls when
	// its fuel runs out: () -> i32, the next allowance. YieldModule is the host's own module,
	// the one its wqhost/v1 functions live in.
	YieldModule = "wqhost"
	YieldImport = "wqhost_yield"
	// GlobalExport is the export naming the fuel global, which the host reads before and
	// after each call to meter it. A module exporting that name itself makes the
	// instrumented module invalid, and so runs under close-on-context-done, unmetered.
	GlobalExport = "wqhost_fuel"
)

// ErrUndecodable marks a module the rewriter does not understand: the host runs it
// uninstrumented, under close-on-context-done.
var ErrUndecodable = errors.New("fuel: cannot instrument module")

// Instrument returns wasm with the fuel counter added (see the package doc), or an error wrapping
// ErrUndecodable for anything it cannot decode. The yield import goes last among the
// imported functions, so every defined function's index moves up by one: calls, ref.func,
// exports, the start function, element segments and the name section are renumbered. It
// drops DWARF and source-map custom sections, whose code offsets the inserted checks would
// make wrong. wasm must be valid (validated first, as Engine.Compile does): the rewriter
// checks what it needs to rewrite, and that no reference one past the module's own globals or
// types would land on the ones it adds, but not the rest of validity.
func Instrument(wasm []byte) ([]byte, error) {
	return InstrumentWith(wasm, Default())
}

// Default returns the options Instrument uses.
func Default() Options {
	return Options{Segment: SegmentBytes, Fuel: Refill, Unroll: UnrollCopies}
}

// Options are what tests and benchmarks vary; Default gives Instrument's.
type Options struct {
	// Segment: a check at least every Segment bytes of code (0: between every two
	// instructions).
	Segment uint64
	// Fuel is what an instance starts with (0: the first check yields).
	Fuel int32
	// Unroll is the fewest copies of a small loop's body per check (1: no unrolling).
	Unroll int
	// TestEntries keeps every entry's test (no untestedEntry).
	TestEntries bool
	// Pad, NoChecks and Bare move the code for benchmarks (runtime's BenchmarkFuelCost).
	// Pad adds that many charges of 0 without a test at the entry of the module's first
	// function (in a Go module go_buildid, never called), which shifts every later function
	// in the compiled code; NoChecks leaves every other check out, for the same module
	// without a limit placed the same way; and Bare rewrites the code as Instrument does
	// (unrolled loops, calls to the copies of small functions) but writes no check, charge,
	// spill or reload, the baseline that prices the checks alone.
	Pad      int
	NoChecks bool
	Bare     bool
}

// InstrumentWith is Instrument with opt.
func InstrumentWith(wasm []byte, opt Options) ([]byte, error) {
	fail := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("%w: %s", ErrUndecodable, fmt.Sprintf(format, args...))
	}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return fail("not a core wasm module")
	}
	var secs []wasmbin.Section
	r := &wasmbin.Reader{Buf: wasm, Pos: 8}
	lastRank := 0
	for r.Pos < len(r.Buf) {
		id := r.Byte()
		n := r.U32()
		payload := r.Bytes(int(n))
		if r.Err != nil {
			return fail("section header at offset %d: %v", r.Pos, r.Err)
		}
		if id > wasmbin.MaxSectionID || id != wasmbin.SecCustom && wasmbin.SectionRank[id] == 0 {
			return fail("unknown section id %d", id)
		}
		if id != wasmbin.SecCustom {
			if wasmbin.SectionRank[id] <= lastRank {
				return fail("section %d out of order", id)
			}
			lastRank = wasmbin.SectionRank[id]
		}
		secs = append(secs, wasmbin.Section{ID: id, Payload: payload})
	}

	var types, importedFuncs, importedGlobals, definedGlobals uint32
	var typeParams, params []uint32
	for _, s := range secs {
		switch s.ID {
		case wasmbin.SecType:
			var err error
			if typeParams, err = wasmbin.FuncTypeParams(s.Payload); err != nil {
				return fail("type section: %v", err)
			}
			types = uint32(len(typeParams))
		case wasmbin.SecImport:
			_, f, g, err := wasmbin.CountImports(s.Payload, types)
			if err != nil {
				return fail("import section: %v", err)
			}
			importedFuncs, importedGlobals = f, g
		case wasmbin.SecFunc:
			var err error
			if params, err = wasmbin.FuncParams(s.Payload, typeParams); err != nil {
				return fail("function section: %v", err)
			}
		case wasmbin.SecGlobal:
			r := &wasmbin.Reader{Buf: s.Payload}
			definedGlobals = r.U32()
			if r.Err != nil {
				return fail("global section: %v", r.Err)
			}
		case wasmbin.SecTag:
			return fail("exception tags are not supported")
		}
	}
	x := &fuelIndex{fuel: importedGlobals + definedGlobals, yield: importedFuncs, types: types}
	first := importedFuncs + 1 + uint32(len(params)) // the first function the instrumenter adds
	if len(params) > 0 && definesMemory(secs) {
		// The bulk helpers follow the module's own functions (bulkHelpers).
		x.bulk = first
		first += 2
	}
	var ftypes []uint32
	for _, s := range secs {
		var err error
		switch s.ID {
		case wasmbin.SecFunc:
			ftypes, err = wasmbin.FuncTypes(s.Payload)
		case wasmbin.SecCode:
			x.leaves, err = findLeaves(s.Payload, x, params, first)
		}
		if err != nil {
			return fail("section %d: %v", s.ID, err)
		}
	}
	if x.leaves == nil {
		x.leaves = &leaves{}
	}

	out := make([]byte, 0, len(wasm)+len(wasm)/8+64)
	out = append(out, wasm[:8]...)
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = wasmbin.AppendU32(out, uint32(len(payload)))
		out = append(out, payload...)
	}
	// Sections the instrumenter adds to when present, or creates when absent, in rank order.
	added := map[byte]bool{}
	add := map[byte]func([]byte) ([]byte, error){
		wasmbin.SecType: func(p []byte) ([]byte, error) {
			p = wasmbin.AppendVec(p, types, []byte{0x60, 0x00, 0x01, 0x7f}) // () -> i32
			if x.bulk != 0 {
				p = wasmbin.AppendVec(p, types+1, []byte{0x60, 0x03, 0x7f, 0x7f, 0x7f, 0x00}) // (i32, i32, i32) -> ()
			}
			return p, nil
		},
		wasmbin.SecImport: func(p []byte) ([]byte, error) {
			var n uint32 // every import, of any kind: the section's count
			if p != nil {
				n, _, _, _ = wasmbin.CountImports(p, types)
			}
			e := wasmbin.AppendName(nil, YieldModule)
			e = wasmbin.AppendName(e, YieldImport)
			e = append(e, 0x00)
			e = wasmbin.AppendU32(e, types)
			return wasmbin.AppendVec(p, n, e), nil
		},
		wasmbin.SecExport: func(p []byte) ([]byte, error) {
			var n uint32
			if p != nil {
				var err error
				if p, err = remapExports(p, x); err != nil {
					return nil, err
				}
				n = (&wasmbin.Reader{Buf: p}).U32()
			}
			e := wasmbin.AppendName(nil, GlobalExport)
			e = append(e, 0x03)
			e = wasmbin.AppendU32(e, x.fuel)
			return wasmbin.AppendVec(p, n, e), nil
		},
		wasmbin.SecGlobal: func(p []byte) ([]byte, error) {
			g := append([]byte{0x7f, 0x01, 0x41}, wasmbin.AppendS32(nil, opt.Fuel)...) // mut i32 = Refill
			if p != nil {
				var err error
				if p, err = remapGlobals(p, x); err != nil {
					return nil, err
				}
			}
			return wasmbin.AppendVec(p, definedGlobals, append(g, 0x0b)), nil
		},
	}
	flush := func(rank int) {
		for _, id := range []byte{wasmbin.SecType, wasmbin.SecImport, wasmbin.SecGlobal, wasmbin.SecExport} {
			if !added[id] && rank > wasmbin.SectionRank[id] {
				p, _ := add[id](nil)
				emit(id, p)
				added[id] = true
			}
		}
	}
	for _, s := range secs {
		if s.ID == wasmbin.SecCustom {
			r := &wasmbin.Reader{Buf: s.Payload}
			name := r.Name()
			if r.Err != nil {
				return fail("custom section name: %v", r.Err)
			}
			switch {
			case strings.HasPrefix(name, ".debug_") || name == "sourceMappingURL" || name == "external_debug_info":
				continue
			case name == "name":
				p, err := remapNames(s.Payload, r.Pos, x)
				if err != nil {
					// Names are for stack traces only: a section we cannot read is dropped.
					continue
				}
				emit(s.ID, p)
				continue
			}
			emit(s.ID, s.Payload)
			continue
		}
		flush(wasmbin.SectionRank[s.ID])
		var p []byte
		var err error
		switch s.ID {
		case wasmbin.SecType, wasmbin.SecImport, wasmbin.SecGlobal, wasmbin.SecExport:
			p, err = add[s.ID](s.Payload)
			added[s.ID] = true
		case wasmbin.SecStart:
			r := &wasmbin.Reader{Buf: s.Payload}
			p = wasmbin.AppendU32(nil, x.fn(r.U32()))
			err = r.Err
		case wasmbin.SecFunc:
			p = s.Payload
			if x.bulk != 0 || len(x.leaves.copies) > 0 {
				r := &wasmbin.Reader{Buf: s.Payload}
				n := r.U32()
				var add []byte
				if x.bulk != 0 {
					add = wasmbin.AppendU32(wasmbin.AppendU32(add, types+1), types+1)
					n += 2
				}
				for _, f := range x.leaves.copies {
					add = wasmbin.AppendU32(add, ftypes[f])
				}
				n += uint32(len(x.leaves.copies))
				p = append(append(wasmbin.AppendU32(nil, n), s.Payload[r.Pos:]...), add...)
			}
		case wasmbin.SecElem:
			p, err = remapElems(s.Payload, x)
		case wasmbin.SecCode:
			p, err = instrumentCode(s.Payload, x, params, opt)
		default:
			p = s.Payload
		}
		if err != nil {
			return fail("section %d: %v", s.ID, err)
		}
		emit(s.ID, p)
	}
	flush(maxInt)
	return out, nil
}

const maxInt = int(^uint(0) >> 1)

// fuelIndex holds the indices the instrumented code refers to.
type fuelIndex struct {
	fuel  uint32 // the fuel global, one past the module's own
	yield uint32 // the yield import; defined functions at or above it move up by one
	types uint32 // the module's own types; the yield function's comes next
	// bulk is the index of the memory.fill helper, the memory.copy one's next (bulkHelpers);
	// 0 in a module without a memory, which has neither.
	bulk uint32
	// leaves are the small functions whose direct calls go to copies without checks
	// (leaf.go); nil while findLeaves looks for them.
	leaves *leaves
}

// fn maps an original function index to the instrumented module's.
func (x *fuelIndex) fn(i uint32) uint32 {
	if i >= x.yield {
		return i + 1
	}
	return i
}

// instrumentCode instruments the code section payload; params are the numbers of parameters
// of the module's defined functions, in order.
func instrumentCode(payload []byte, x *fuelIndex, params []uint32, opt Options) ([]byte, error) {
	r := &wasmbin.Reader{Buf: payload}
	n := r.U32()
	if r.Err != nil {
		return nil, r.Err
	}
	if int64(n) != int64(len(params)) {
		return nil, fmt.Errorf("%d bodies for %d functions", n, len(params))
	}
	out := make([]byte, 0, len(payload)+len(payload)/4+16)
	added := uint32(len(x.leaves.copies))
	if x.bulk != 0 {
		added += 2
	}
	out = wasmbin.AppendU32(out, n+added)
	var body []byte
	scratch := bodyScratch{segment: opt.Segment, unroll: opt.Unroll, testEntries: opt.TestEntries, noChecks: opt.NoChecks, bare: opt.Bare}
	for f := range n {
		size := r.U32()
		src := r.Bytes(int(size))
		if r.Err != nil {
			return nil, fmt.Errorf("function %d: %w", f, r.Err)
		}
		var err error
		scratch.pad = 0
		if f == 0 {
			scratch.pad = opt.Pad
		}
		body, err = instrumentBody(body[:0], src, x, params[f], &scratch)
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", f, err)
		}
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.Pos != len(payload) {
		return nil, fmt.Errorf("%d trailing bytes", len(payload)-r.Pos)
	}
	if x.bulk != 0 {
		out = bulkHelpers(out, x)
	}
	return appendLeafCopies(out, x, params, opt)
}

// BulkShift is the charge's shift: one unit per 1<<BulkShift bytes.
const BulkShift = 4

// definesMemory reports whether the module defines a memory (one it imports cannot be
// satisfied by the host, so the module never runs).
func definesMemory(secs []wasmbin.Section) bool {
	for _, s := range secs {
		if s.ID == 5 {
			return (&wasmbin.Reader{Buf: s.Payload}).U32() > 0
		}
	}
	return false
}

// bulkHelpers appends the bodies of the memory.fill and memory.copy helpers (see the package doc),
// each (dst, val or src, len i32) -> () with one i32 local.
func bulkHelpers(out []byte, x *fuelIndex) []byte {
	for _, op := range [][]byte{{0xfc, 0x0b, 0x00}, {0xfc, 0x0a, 0x00, 0x00}} { // memory.fill, memory.copy
		b := []byte{0x01, 0x01, 0x7f, 0x23} // one i32 local; global.get
		b = wasmbin.AppendU32(b, x.fuel)
		b = append(b, 0x20, 0x02, 0x41, BulkShift, 0x76, 0x6b, 0x22, 0x03, 0x24) // local.get len, i32.const, i32.shr_u, i32.sub, local.tee, global.set
		b = wasmbin.AppendU32(b, x.fuel)
		b = append(b, 0x20, 0x03, 0x41, 0x00, 0x48, 0x04, 0x40, 0x10) // local.get, i32.const 0, i32.lt_s, if, call
		b = wasmbin.AppendU32(b, x.yield)
		b = append(b, 0x24) // global.set
		b = wasmbin.AppendU32(b, x.fuel)
		b = append(b, 0x0b, 0x20, 0x00, 0x20, 0x01, 0x20, 0x02) // end, the operands
		b = append(append(b, op...), 0x0b)
		out = wasmbin.AppendU32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}
