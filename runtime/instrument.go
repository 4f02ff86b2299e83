package runtime

import (
	"errors"
	"fmt"
	"strings"
)

// The time limit without wazero's close-on-context-done. That option (wazero 1.12) starts a
// watchdog goroutine per call and makes compiled code leave for Go at every loop back-edge
// (wazero issue #2466), which made CPU-bound guests several times slower. Instead a module
// is instrumented once at load with a fuel counter: one mutable i32 global, which each
// function keeps in a local of its own while it runs (loaded at its entry and after every
// call, stored back before every call and wherever it returns), charged at every function
// entry and loop header,
//
//	block
//	  block
//	    local.get  $f      ;; global.get $fuel at the function's entry
//	    i32.const  <charge>
//	    i32.sub
//	    local.tee  $f
//	    i32.const  0
//	    i32.lt_s
//	    br_if 0            ;; out of fuel
//	    br 1
//	  end
//	  call $yield          ;; the host: ends the call if its time is up, else refills the fuel
//	  local.set $f
//	end
//
// which compiles to a subtraction and a branch on a register, not taken (version 3 kept the
// fuel in the global alone, a load, a store and a load more per check, and wrote the yield
// in an if, which wazero lays out in the way of the common path: 3.0× on a counting loop,
// 1.15× on the CPU-heavy Go guest; see BenchmarkFuelCost). A function whose every loop
// calls keeps the fuel in the global instead (the local is then a temporary): the fuel
// would go through the global at each call anyway, and the spills would cost more than the
// checks save (callFreeLoop). Small innermost loops are unrolled, their header's check run
// and charged once per 4 to 32 passes, its yield after the loop (instrument_emit.go), and a function whose entry runs
// straight into a loop's check, or a small one that calls nothing, charges at its entry
// without a test (untestedEntry). A small function with no loop and no call (a leaf) is
// charged by its direct callers instead: their calls go to a copy of it without checks, and
// count its code as theirs, so a loop calling it neither spills its fuel nor pays a second
// load-charge-store of the global per pass (instrument_leaf.go; version 8's `call` case of
// BenchmarkFuelCost ran about 2× on a 2 GHz EPYC). The global is what the host and the other functions see;
// a trap leaves a function's last charges in its local, and ends the call. When the fuel
// runs out the guest calls the host's yield function (an import the instrumenter adds),
// which traps the call when its time limit has passed or its caller's context has ended,
// and otherwise returns a new allowance.
//
// Why a call into Go rather than a flag the host sets: compiled guest code cannot be
// preempted by the Go scheduler. With as many spinning guests as GOMAXPROCS, no goroutine,
// timer or AfterFunc would ever run again to set a flag (wazero's own check leaves for Go at
// every loop iteration for the same reason). The yield call gives the scheduler a point to
// preempt the goroutine, every fuelRefill units at most.
//
// Checks go at every function entry and loop header, and inside long stretches of code: a
// check charges 1 plus one unit per chargeBytes bytes of the most code that can run before
// the next check on any path, plus bulkCharge per bulk memory operation (or memory.grow) on
// it, with no cap below a whole allowance. Straight-line code, big if arms and huge loop
// bodies get a check every segmentBytes at most (instrument_body.go), so no stretch between
// two checks runs for long and each pays for what it runs: a guest returns to the host after
// about fuelRefill small loop iterations or fuelRefill*chargeBytes bytes of straight-line
// code (a millisecond or two) however its code is shaped. The old scheme charged only at
// function entries and loop headers, capped at 64 units: a 1.8 MB function called in a loop
// ran 2.9 s under a 1 s limit.
//
// instrument expects valid WebAssembly: Engine.Compile validates a module (the checker) before
// it instruments it, and the instrumented bytes are validated again when a tenant compiles
// them, falling back to close-on-context-done if they fail (errInstrumentedInvalid). The
// rewriter itself refuses what instrumenting could make valid: a reference one past the
// module's own globals, types or a function's locals, which would land on the fuel global,
// the yield type or the fuel local (no function index can land on the yield import: the
// ones at or above it move up). A module the decoder below cannot read (exception tags, GC
// types) is left as it is and runs under close-on-context-done as before.

// Instrumentation constants; see above.
const (
	fuelRefill  = 1 << 15
	chargeBytes = 32
	bulkCharge  = 1024
	// instrumentVersion names the cached instrumented modules: raise it with any change
	// to what instrument writes.
	instrumentVersion = 9
	// yieldImport is the host function the instrumented code calls (module hostModuleName).
	yieldImport = "wqhost_yield"
	// fuelExport is the export naming the fuel global, which the host reads before and
	// after each call to meter it (meter.go). A module exporting that name itself makes the
	// instrumented module invalid, and so runs under close-on-context-done, unmetered.
	fuelExport = "wqhost_fuel"
)

// yieldCode is a module instrumented with a fuel counter.
type yieldCode struct {
	wasm []byte
}

// errUndecodable marks a module the instrumenter does not understand.
var errUndecodable = errors.New("fuel: cannot instrument module")

// errInstrumentedInvalid marks instrumented bytes that failed validation when a tenant
// compiled them: a defect of the instrumenter (or a damaged cache file), after which the
// module runs uninstrumented under close-on-context-done rather than not at all.
var errInstrumentedInvalid = errors.New("fuel: the instrumented module is not valid")

// instrument returns wasm with the fuel counter added (see above), or an error wrapping
// errUndecodable for anything it cannot decode. The yield import goes last among the
// imported functions, so every defined function's index moves up by one: calls, ref.func,
// exports, the start function, element segments and the name section are renumbered. It
// drops DWARF and source-map custom sections, whose code offsets the inserted checks would
// make wrong. wasm must be valid (validated first, as Engine.Compile does): the rewriter
// checks what it needs to rewrite, and that no reference one past the module's own globals or
// types would land on the ones it adds, but not the rest of validity.
func instrument(wasm []byte) (*yieldCode, error) {
	return instrumentWith(wasm, instrumentOptions{segment: segmentBytes, fuel: fuelRefill, unroll: unrollCopies})
}

// instrumentOptions are what tests vary: a check at least every segment bytes of code (with
// 0, between every two instructions), the fuel an instance starts with (with 0, the first
// check yields), the copies of a small loop's body per check (1: no unrolling), and whether
// every entry tests (testEntries: no untestedEntry). Benchmarks also move the code: pad
// adds that many charges of 0 without a test at the entry of the module's first function (in
// a Go module go_buildid, never called), which shifts every later function in the compiled
// code; noChecks leaves every other check out, for the same module without a limit placed
// the same way; and bare rewrites the code as instrument does (unrolled loops, calls to the
// copies of small functions) but writes no check, charge, spill or reload, the baseline
// that prices the checks alone (BenchmarkFuelCost).
type instrumentOptions struct {
	segment     uint64
	fuel        int32
	unroll      int
	testEntries bool
	pad         int
	noChecks    bool
	bare        bool
}

// instrumentWith is instrument with opt.
func instrumentWith(wasm []byte, opt instrumentOptions) (*yieldCode, error) {
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
	var typeParams, params []uint32
	for _, s := range secs {
		switch s.id {
		case secType:
			var err error
			if typeParams, err = funcTypeParams(s.payload); err != nil {
				return fail("type section: %v", err)
			}
			types = uint32(len(typeParams))
		case secImport:
			_, f, g, err := countImports(s.payload, types)
			if err != nil {
				return fail("import section: %v", err)
			}
			importedFuncs, importedGlobals = f, g
		case secFunc:
			var err error
			if params, err = funcParams(s.payload, typeParams); err != nil {
				return fail("function section: %v", err)
			}
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
		switch s.id {
		case secFunc:
			ftypes, err = funcTypes(s.payload)
		case secCode:
			x.leaves, err = findLeaves(s.payload, x, params, first)
		}
		if err != nil {
			return fail("section %d: %v", s.id, err)
		}
	}
	if x.leaves == nil {
		x.leaves = &leaves{}
	}

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
			p = appendVec(p, types, []byte{0x60, 0x00, 0x01, 0x7f}) // () -> i32
			if x.bulk != 0 {
				p = appendVec(p, types+1, []byte{0x60, 0x03, 0x7f, 0x7f, 0x7f, 0x00}) // (i32, i32, i32) -> ()
			}
			return p, nil
		},
		secImport: func(p []byte) ([]byte, error) {
			var n uint32 // every import, of any kind: the section's count
			if p != nil {
				n, _, _, _ = countImports(p, types)
			}
			e := appendName(nil, hostModuleName)
			e = appendName(e, yieldImport)
			e = append(e, 0x00)
			e = appendU32(e, types)
			return appendVec(p, n, e), nil
		},
		secExport: func(p []byte) ([]byte, error) {
			var n uint32
			if p != nil {
				var err error
				if p, err = remapExports(p, x); err != nil {
					return nil, err
				}
				n = (&reader{b: p}).u32()
			}
			e := appendName(nil, fuelExport)
			e = append(e, 0x03)
			e = appendU32(e, x.fuel)
			return appendVec(p, n, e), nil
		},
		secGlobal: func(p []byte) ([]byte, error) {
			g := append([]byte{0x7f, 0x01, 0x41}, appendS32(nil, opt.fuel)...) // mut i32 = fuelRefill
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
		for _, id := range []byte{secType, secImport, secGlobal, secExport} {
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
		case secType, secImport, secGlobal, secExport:
			p, err = add[s.id](s.payload)
			added[s.id] = true
		case secStart:
			r := &reader{b: s.payload}
			p = appendU32(nil, x.fn(r.u32()))
			err = r.err
		case secFunc:
			p = s.payload
			if x.bulk != 0 || len(x.leaves.copies) > 0 {
				r := &reader{b: s.payload}
				n := r.u32()
				var add []byte
				if x.bulk != 0 {
					add = appendU32(appendU32(add, types+1), types+1)
					n += 2
				}
				for _, f := range x.leaves.copies {
					add = appendU32(add, ftypes[f])
				}
				n += uint32(len(x.leaves.copies))
				p = append(append(appendU32(nil, n), s.payload[r.i:]...), add...)
			}
		case secElem:
			p, err = remapElems(s.payload, x)
		case secCode:
			p, err = instrumentCode(s.payload, x, params, opt)
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
	fuel  uint32 // the fuel global, one past the module's own
	yield uint32 // the yield import; defined functions at or above it move up by one
	types uint32 // the module's own types; the yield function's comes next
	// bulk is the index of the memory.fill helper, the memory.copy one's next (bulkHelpers);
	// 0 in a module without a memory, which has neither.
	bulk uint32
	// leaves are the small functions whose direct calls go to copies without checks
	// (instrument_leaf.go); nil while findLeaves looks for them.
	leaves *leaves
}

// fn maps an original function index to the instrumented module's.
func (x *fuelIndex) fn(i uint32) uint32 {
	if i >= x.yield {
		return i + 1
	}
	return i
}

// appendCheck appends the fuel check (see above) with the given charge, on the fuel local
// fl of the function it goes in; at the function's entry (entry) the check reads the fuel
// global instead, which sets the local. The charge is written as a 5-byte LEB128: all of a
// module's checks differ only in those 5 bytes and the local's index.
func (x *fuelIndex) appendCheck(b []byte, fl, charge uint32, entry bool) []byte {
	b = append(b, 0x02, 0x40, 0x02, 0x40) // block, block
	if entry {
		b = append(b, 0x23) // global.get
		b = appendU32(b, x.fuel)
	} else {
		b = append(b, 0x20) // local.get
		b = appendU32(b, fl)
	}
	b = append(b, 0x41)
	b = appendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x22) // i32.sub, local.tee
	b = appendU32(b, fl)
	// The yield banks a whole allowance, whatever the global holds (fuelRefilled): storing
	// the local first would meter the last one to the unit, but costs the counting loop 9%
	// (1.09x against 1.007x), through what it does to the loop's registers.
	b = append(b, 0x41, 0x00, 0x48, 0x0d, 0x00, 0x0c, 0x01, 0x0b, 0x10) // i32.const 0, i32.lt_s, br_if 0, br 1, end, call
	b = appendU32(b, x.yield)
	b = append(b, 0x21) // local.set
	b = appendU32(b, fl)
	return append(b, 0x0b)
}

// appendFastCheck appends the test of an unrolled loop's header (instrument_emit.go): the
// charge on the fuel local fl and a branch, when that runs the fuel out, to the yield the
// loop has after its end.
func (x *fuelIndex) appendFastCheck(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x20) // local.get
	b = appendU32(b, fl)
	b = append(b, 0x41)
	b = appendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x22) // i32.sub, local.tee
	b = appendU32(b, fl)
	return append(b, 0x41, 0x00, 0x48, 0x0d, 0x01) // i32.const 0, i32.lt_s, br_if $slow
}

// appendGlobalFastCheck is appendFastCheck in global mode: on the fuel global, with the
// fuel local fl as a temporary.
func (x *fuelIndex) appendGlobalFastCheck(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x23) // global.get
	b = appendU32(b, x.fuel)
	b = append(b, 0x41)
	b = appendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x22) // i32.sub, local.tee
	b = appendU32(b, fl)
	b = append(b, 0x24) // global.set
	b = appendU32(b, x.fuel)
	b = append(b, 0x20) // local.get
	b = appendU32(b, fl)
	return append(b, 0x41, 0x00, 0x48, 0x0d, 0x01) // i32.const 0, i32.lt_s, br_if $slow
}

// appendLocalCharge appends a charge to the fuel local fl without a test (a negative one
// gives fuel back: an unrolled loop left within a group, instrument_emit.go).
func (x *fuelIndex) appendLocalCharge(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x20) // local.get
	b = appendU32(b, fl)
	b = append(b, 0x41)
	b = appendS32(b, int32(charge))
	b = append(b, 0x6b, 0x21) // i32.sub, local.set
	return appendU32(b, fl)
}

// appendSpill appends the store of the fuel local fl to the fuel global, before a call or
// where the function is left.
func (x *fuelIndex) appendSpill(b []byte, fl uint32) []byte {
	b = append(b, 0x20)
	b = appendU32(b, fl)
	b = append(b, 0x24)
	return appendU32(b, x.fuel)
}

// appendEntryCharge appends the fuel global's load into the fuel local fl less charge,
// without a test: a function's entry when a loop's check follows (untestedEntry).
func (x *fuelIndex) appendEntryCharge(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x23)
	b = appendU32(b, x.fuel)
	b = append(b, 0x41)
	b = appendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x21) // i32.sub, local.set
	return appendU32(b, fl)
}

// appendGlobalCheck appends the check of a function in global mode (callFreeLoop): on the
// fuel global, with the fuel local fl as a temporary.
func (x *fuelIndex) appendGlobalCheck(b []byte, fl, charge uint32) []byte {
	b = append(b, 0x02, 0x40, 0x02, 0x40, 0x23) // block, block, global.get
	b = appendU32(b, x.fuel)
	b = append(b, 0x41)
	b = appendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x22) // i32.sub, local.tee
	b = appendU32(b, fl)
	b = append(b, 0x24) // global.set
	b = appendU32(b, x.fuel)
	b = append(b, 0x20) // local.get
	b = appendU32(b, fl)
	b = append(b, 0x41, 0x00, 0x48, 0x0d, 0x00, 0x0c, 0x01, 0x0b, 0x10) // i32.const 0, i32.lt_s, br_if 0, br 1, end, call
	b = appendU32(b, x.yield)
	b = append(b, 0x24) // global.set
	b = appendU32(b, x.fuel)
	return append(b, 0x0b)
}

// appendGlobalCharge appends a charge to the fuel global without a test: an entry
// (untestedEntry) in global mode, or a benchmark's pad (instrumentOptions).
func (x *fuelIndex) appendGlobalCharge(b []byte, charge uint32) []byte {
	b = append(b, 0x23)
	b = appendU32(b, x.fuel)
	b = append(b, 0x41)
	b = appendS32Padded(b, int32(charge))
	b = append(b, 0x6b, 0x24) // i32.sub, global.set
	return appendU32(b, x.fuel)
}

// appendReload appends the load of the fuel global into the fuel local fl, after a call.
func (x *fuelIndex) appendReload(b []byte, fl uint32) []byte {
	b = append(b, 0x23)
	b = appendU32(b, x.fuel)
	b = append(b, 0x21)
	return appendU32(b, fl)
}

// instrumentCode instruments the code section payload; params are the numbers of parameters
// of the module's defined functions, in order.
func instrumentCode(payload []byte, x *fuelIndex, params []uint32, opt instrumentOptions) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	if int64(n) != int64(len(params)) {
		return nil, fmt.Errorf("%d bodies for %d functions", n, len(params))
	}
	out := make([]byte, 0, len(payload)+len(payload)/4+16)
	added := uint32(len(x.leaves.copies))
	if x.bulk != 0 {
		added += 2
	}
	out = appendU32(out, n+added)
	var body []byte
	scratch := bodyScratch{segment: opt.segment, unroll: opt.unroll, testEntries: opt.testEntries, noChecks: opt.noChecks, bare: opt.bare}
	for f := range n {
		size := r.u32()
		src := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("function %d: %w", f, r.err)
		}
		var err error
		scratch.pad = 0
		if f == 0 {
			scratch.pad = opt.pad
		}
		body, err = instrumentBody(body[:0], src, x, params[f], &scratch)
		if err != nil {
			return nil, fmt.Errorf("function body %d: %w", f, err)
		}
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.i != len(payload) {
		return nil, fmt.Errorf("%d trailing bytes", len(payload)-r.i)
	}
	if x.bulk != 0 {
		out = bulkHelpers(out, x)
	}
	return appendLeafCopies(out, x, params, opt)
}

// Bulk memory operations. memory.fill and memory.copy run in the engine, not in guest code,
// and a constant charge per operation let one call move up to the whole memory limit: a
// loop filling 1 GiB a pass ran 5.7 s under a 2 s limit (32 passes an allowance). So in a
// module with a memory each memory.fill and memory.copy becomes a call to one of two helper
// functions the instrumenter appends after the module's own, which charge the fuel global
// one unit per 16 bytes of the length (as host functions charge a copy, charge.go), yield
// when the fuel runs out, and then do the operation: a loop of them yields every allowance
// of bytes, and one operation of any length at most once before it runs. A trap inside the
// operation is the same trap, one frame deeper.

// bulkShift is the charge's shift: one unit per 1<<bulkShift bytes.
const bulkShift = 4

// definesMemory reports whether the module defines a memory (one it imports cannot be
// satisfied by the host, so the module never runs).
func definesMemory(secs []section) bool {
	for _, s := range secs {
		if s.id == 5 {
			return (&reader{b: s.payload}).u32() > 0
		}
	}
	return false
}

// bulkHelpers appends the bodies of the memory.fill and memory.copy helpers (see above),
// each (dst, val or src, len i32) -> () with one i32 local.
func bulkHelpers(out []byte, x *fuelIndex) []byte {
	for _, op := range [][]byte{{0xfc, 0x0b, 0x00}, {0xfc, 0x0a, 0x00, 0x00}} { // memory.fill, memory.copy
		b := []byte{0x01, 0x01, 0x7f, 0x23} // one i32 local; global.get
		b = appendU32(b, x.fuel)
		b = append(b, 0x20, 0x02, 0x41, bulkShift, 0x76, 0x6b, 0x22, 0x03, 0x24) // local.get len, i32.const, i32.shr_u, i32.sub, local.tee, global.set
		b = appendU32(b, x.fuel)
		b = append(b, 0x20, 0x03, 0x41, 0x00, 0x48, 0x04, 0x40, 0x10) // local.get, i32.const 0, i32.lt_s, if, call
		b = appendU32(b, x.yield)
		b = append(b, 0x24) // global.set
		b = appendU32(b, x.fuel)
		b = append(b, 0x0b, 0x20, 0x00, 0x20, 0x01, 0x20, 0x02) // end, the operands
		b = append(append(b, op...), 0x0b)
		out = appendU32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}
