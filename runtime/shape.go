package runtime

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// The compile budget's first line: structural caps, checked by one cheap pass over the
// module's bytes before wazero decodes, validates or compiles any of it.
//
// wazero's cost is not linear in a module's size for every shape of code. Measured on
// wazero 1.12, optimizing compiler, one function each (docs/guarantees.md, "Hostile
// guests"): 10,000 nested loops (30 KB) take 1.3 s, and 15 s once the fuel counter adds its
// check to each; 10,000 conditional branches (40 KB) 4 to 8 s, 25,000 19 s; one br_table of
// 1,000,000 targets 530 s and 2.3 GB; 10,000 branches in a function reading 50,000 locals
// 33 s; a 10-byte declaration of 4 billion locals makes the decoder allocate 4 GB. Each of
// those is a number one pass over the code section reads: the function count, a body's
// size, its deepest nesting of blocks and of loops, its branches and its locals. The
// defaults are far above what real compilers emit (the largest of the standard-Go, TinyGo
// and Rust modules this project builds, shape_test.go) and far below what hurts.

// CompileLimits are the structural caps a module must fit before it is compiled. A zero
// field takes its Default… value.
type CompileLimits struct {
	// MaxFunctions caps the functions a module defines and imports together.
	MaxFunctions int
	// MaxFunctionBytes caps one function body's size in bytes.
	MaxFunctionBytes int
	// MaxNestingDepth caps how deeply one function nests block, loop and if.
	MaxNestingDepth int
	// MaxLoopDepth caps how many loops one function nests in one another.
	MaxLoopDepth int
	// MaxBranches caps one function's branches: if, br and br_if count one each, br_table
	// one per target.
	MaxBranches int
	// MaxLocals caps one function's declared locals (parameters not counted).
	MaxLocals int
	// MaxTableElements caps the elements a module's tables can hold together: each table
	// counts its declared maximum, or its minimum if it has none and no table.grow appears
	// in the code (a table without a maximum that table.grow can grow is refused). Tables
	// live outside the memory limit, 8 bytes an element on the host's heap.
	MaxTableElements int
	// MaxGlobals caps the globals a module imports and defines together: each costs every
	// instance about 90 bytes of the host's heap, outside the memory limit (1,000,000
	// globals, a 5 MB module, took 88 MB an instance).
	MaxGlobals int
	// MaxTypeValues caps the parameters and results of all the module's function types
	// together. wazero compiles a trampoline per type, in the host process, on every load
	// of a module, cached or not: its cost grows with the values, and 8,000 types of 1,000
	// parameters (an 8 MB module) took a host 10 s of CPU and 800 MB after its compile
	// child had finished.
	MaxTypeValues int
	// Timeout and MemoryBytes bound a compile in a child process (compilechild.go); 0
	// takes the engine's CompileTimeout and CompileMemoryBytes.
	Timeout     time.Duration
	MemoryBytes uint64
}

// Defaults of CompileLimits' zero fields. The largest measured in a real module this project
// builds (TestRealModulesFitDefaultCompileLimits) is, for each: 2,198 functions, 29 KiB in
// one body, nesting 550 deep, loops 6 deep, 1,632 branches and 88 locals. The deep nesting
// and the branches are standard Go's (its wasm backend dispatches every function's resume
// points through one br_table into nested blocks), the loops and locals TinyGo's.
// A function at the defaults compiles in at most about 8 s (10,000 branches) on the machine
// that measured the above.
const (
	DefaultMaxFunctions     = 100_000
	DefaultMaxFunctionBytes = 1 << 20
	DefaultMaxNestingDepth  = 10_000
	DefaultMaxLoopDepth     = 500
	DefaultMaxBranches      = 10_000
	DefaultMaxLocals        = 2_000
	// DefaultMaxTableElements (8 MiB of host memory per instance) is far above the tables
	// real compilers emit (one element per function whose address is taken: at most
	// max_functions) and far below what hurts: wazero lets table.grow reach 4 billion
	// elements, and a loop growing a table without a maximum took the host to 18 GB of
	// resident memory in seconds, past any time limit (the allocations run in Go, between
	// two fuel checks).
	DefaultMaxTableElements = 1 << 20
	// DefaultMaxTypeValues is far above what real compilers emit (TestRealModulesFitDefaultCompileLimits)
	// and costs a load at most about 60 ms and 5 MB of trampolines.
	DefaultMaxTypeValues = 50_000
	// DefaultMaxGlobals (about 1 MB an instance) is far above what real compilers emit
	// (TestRealModulesFitDefaultCompileLimits).
	DefaultMaxGlobals = 10_000
)

func (l CompileLimits) withDefaults() CompileLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxFunctions, DefaultMaxFunctions)
	def(&l.MaxFunctionBytes, DefaultMaxFunctionBytes)
	def(&l.MaxNestingDepth, DefaultMaxNestingDepth)
	def(&l.MaxLoopDepth, DefaultMaxLoopDepth)
	def(&l.MaxBranches, DefaultMaxBranches)
	def(&l.MaxLocals, DefaultMaxLocals)
	def(&l.MaxTableElements, DefaultMaxTableElements)
	def(&l.MaxTypeValues, DefaultMaxTypeValues)
	def(&l.MaxGlobals, DefaultMaxGlobals)
	return l
}

// ErrCompileLimit marks a module refused by a CompileLimits cap, before compiling.
var ErrCompileLimit = errors.New("compile limit")

// CapError says which cap a module broke, the cap's value and where.
type CapError struct {
	Cap      string // the config key: max_functions, max_function_bytes, max_nesting_depth, max_locals
	Limit    int
	Got      uint64
	Function int // the function's index (imports first, as in the binary's index space); -1 for the module
	// Why, when the number alone does not say it (a table table.grow can grow without end).
	Why string
}

func (e *CapError) Error() string {
	where := ""
	if e.Function >= 0 {
		where = fmt.Sprintf(" in function %d", e.Function)
	}
	why := ""
	if e.Why != "" {
		why = " (" + e.Why + ")"
	}
	return fmt.Sprintf("%s: %d%s, above %s %d%s", ErrCompileLimit, e.Got, where, e.Cap, e.Limit, why)
}

// Unwrap makes errors.Is(err, ErrCompileLimit) hold.
func (e *CapError) Unwrap() error { return ErrCompileLimit }

// moduleShape is what the pre-scan measured of a module: for each cap, the largest value and
// the function it is in.
type moduleShape struct {
	functions       int
	maxBodyBytes    int
	maxBodyFunc     int
	maxDepth        int
	maxDepthFunc    int
	maxBranches     int
	maxBranchesFunc int
	maxLoops        int
	maxLoopsFunc    int
	maxLocals       uint64
	maxLocalsFunc   int
	importedFuncs   int
	definedFuncs    int
	// tableMin and tableMax sum the tables' minima and maxima (a table without a maximum
	// counts its minimum and sets unbounded); tableGrow is set by a table.grow anywhere in
	// the code, without which no table grows past its minimum.
	tableMin, tableMax uint64
	unbounded          bool
	tableGrow          bool
	// typeValues sums the function types' parameters and results.
	typeValues uint64
	// globals counts the globals, imported and defined.
	globals uint64
}

// scanTypes reads the type section and checks its values against MaxTypeValues.
func (s *moduleShape) scanTypes(payload []byte, l CompileLimits) error {
	r := &wasmbin.Reader{Buf: payload}
	n := r.U32()
	for range n {
		if f := r.Byte(); r.Err == nil && f != 0x60 {
			r.Fail(fmt.Errorf("type form 0x%02x", f))
		}
		for range 2 { // params, results
			m := r.U32()
			if s.typeValues += uint64(m); r.Err == nil && s.typeValues > uint64(l.MaxTypeValues) {
				return &CapError{Cap: "max_type_values", Limit: l.MaxTypeValues, Got: s.typeValues, Function: -1,
					Why: "parameters and results of all function types"}
			}
			for i := uint32(0); i < m && r.Err == nil; i++ {
				if t := r.Byte(); !wasmbin.IsValType(t) {
					r.Fail(fmt.Errorf("value of unknown type 0x%02x", t))
				}
			}
		}
		if r.Err != nil {
			return r.Err
		}
	}
	if r.Err == nil && r.Pos != len(payload) {
		r.Fail(errors.New("trailing bytes"))
	}
	return r.Err
}

// checkShape reads wasm's sections and every function body, and returns a *CapError for the
// first cap the module breaks, or an error for bytes it cannot read. It stops reading at the
// first cap broken, so a bomb costs at most one pass over its bytes.
func checkShape(wasm []byte, l CompileLimits) (moduleShape, error) {
	l = l.withDefaults()
	var s moduleShape
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return s, errors.New("invalid magic number")
	}
	r := &wasmbin.Reader{Buf: wasm, Pos: 8}
	for r.Pos < len(r.Buf) && r.Err == nil {
		id := r.Byte()
		size := r.U32()
		payload := r.Bytes(int(size))
		if r.Err != nil {
			return s, fmt.Errorf("section %d: %w", id, r.Err)
		}
		var err error
		switch id {
		case wasmbin.SecImport:
			var funcs, globals uint32
			_, funcs, globals, err = wasmbin.CountImports(payload, ^uint32(0)) // type indices are wazero's to check
			s.importedFuncs = int(funcs)
			s.globals += uint64(globals)
		case wasmbin.SecGlobal:
			if err = scanSection(id, payload); err == nil {
				s.globals += uint64((&wasmbin.Reader{Buf: payload}).U32())
			}
		case wasmbin.SecFunc:
			p, n := &wasmbin.Reader{Buf: payload}, 0
			p.Vec("functions", func(uint32) { p.U32(); n++ })
			if p.Err == nil && p.Pos != len(payload) {
				p.Fail(errors.New("trailing bytes"))
			}
			s.definedFuncs, err = n, p.Err
		case wasmbin.SecCode:
			err = s.scanCode(payload, l)
		case wasmbin.SecTable:
			err = s.scanTables(payload)
		case wasmbin.SecType:
			err = s.scanTypes(payload, l)
		default:
			err = scanSection(id, payload)
		}
		if err != nil {
			var ce *CapError
			if errors.As(err, &ce) {
				return s, err
			}
			return s, fmt.Errorf("section %d: %w", id, err)
		}
		if s.functions = s.importedFuncs + s.definedFuncs; s.functions > l.MaxFunctions {
			return s, &CapError{Cap: "max_functions", Limit: l.MaxFunctions, Got: uint64(s.functions), Function: -1}
		}
	}
	if r.Err == nil {
		if s.globals > uint64(l.MaxGlobals) {
			return s, &CapError{Cap: "max_globals", Limit: l.MaxGlobals, Got: s.globals, Function: -1,
				Why: "globals, imported and defined"}
		}
		return s, s.checkTables(l)
	}
	return s, r.Err
}

// instanceHeapBytes is what an instance of the module holds on the host's heap beyond its
// linear memory, at most: its tables' elements (at their maxima if the code grows a table)
// at 8 bytes each, and its globals at globalBytes each. An instance reserves it from its
// tenant's memory budget (Pool.newInstance).
func (s moduleShape) instanceHeapBytes() int64 {
	n := s.tableMin
	if s.tableGrow {
		n = s.tableMax
	}
	return int64(min(n, math.MaxInt64/16))*8 + int64(min(s.globals, math.MaxInt64/(2*globalBytes)))*globalBytes
}

// globalBytes is what one global costs an instance on wazero 1.12: 1,000,000 globals took 88
// MB an instance.
const globalBytes = 96

// shapeNamed is checkShape with the error worded for the module name.
func shapeNamed(name string, wasm []byte, l CompileLimits) (moduleShape, error) {
	s, err := checkShape(wasm, l)
	return s, nameShapeError(name, err)
}

func nameShapeError(name string, err error) error {
	var ce *CapError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return fmt.Errorf("runtime: %s: %w", name, err)
	}
	return fmt.Errorf("runtime: %s: not a valid wasm module: %w", name, err)
}

func (s *moduleShape) scanCode(payload []byte, l CompileLimits) error {
	r := &wasmbin.Reader{Buf: payload}
	n := r.U32()
	if r.Err == nil && int64(n)+int64(s.importedFuncs) > int64(l.MaxFunctions) {
		return &CapError{Cap: "max_functions", Limit: l.MaxFunctions, Got: uint64(n) + uint64(s.importedFuncs), Function: -1}
	}
	for i := uint32(0); i < n && r.Err == nil; i++ {
		fn := s.importedFuncs + int(i)
		size := r.U32()
		if r.Err == nil && uint64(size) > uint64(l.MaxFunctionBytes) {
			return &CapError{Cap: "max_function_bytes", Limit: l.MaxFunctionBytes, Got: uint64(size), Function: fn}
		}
		body := r.Bytes(int(size))
		if r.Err != nil {
			break
		}
		if len(body) > s.maxBodyBytes {
			s.maxBodyBytes, s.maxBodyFunc = len(body), fn
		}
		if err := s.scanBody(body, fn, l); err != nil {
			var ce *CapError
			if errors.As(err, &ce) {
				return err
			}
			return fmt.Errorf("function %d: %w", fn, err)
		}
	}
	if r.Err == nil && r.Pos != len(payload) {
		r.Fail(errors.New("trailing bytes"))
	}
	return r.Err
}

// scanBody reads one body's locals and instructions, tracking the nesting depth.
func (s *moduleShape) scanBody(body []byte, fn int, l CompileLimits) error {
	r := &wasmbin.Reader{Buf: body}
	var locals uint64
	for range r.U32() {
		locals += uint64(r.U32())
		if r.Err == nil && locals > uint64(l.MaxLocals) {
			return &CapError{Cap: "max_locals", Limit: l.MaxLocals, Got: locals, Function: fn}
		}
		if t := r.Byte(); r.Err == nil && !wasmbin.IsValType(t) {
			return fmt.Errorf("local of unknown type 0x%02x", t)
		}
	}
	if locals > s.maxLocals {
		s.maxLocals, s.maxLocalsFunc = locals, fn
	}
	// open holds one bit per open block, set for a loop: enough to know how many loops
	// enclose the code without a stack as deep as the nesting.
	var open bitStack
	branches := 0
	depth, loops := 1, 0 // the body's own block, closed by its last end
	for r.Pos < len(r.Buf) && r.Err == nil {
		op := r.Byte()
		switch op {
		case 0x02, 0x03, 0x04: // block, loop, if
			depth++
			if depth > l.MaxNestingDepth {
				return &CapError{Cap: "max_nesting_depth", Limit: l.MaxNestingDepth, Got: uint64(depth), Function: fn}
			}
			if depth > s.maxDepth {
				s.maxDepth, s.maxDepthFunc = depth, fn
			}
			open.push(op == 0x03)
			if op == 0x03 {
				loops++
				if loops > l.MaxLoopDepth {
					return &CapError{Cap: "max_loop_depth", Limit: l.MaxLoopDepth, Got: uint64(loops), Function: fn}
				}
				if loops > s.maxLoops {
					s.maxLoops, s.maxLoopsFunc = loops, fn
				}
			}
		case 0x0b: // end
			depth--
			if depth == 0 && r.Pos != len(r.Buf) {
				return errors.New("code after the function's end")
			}
			if depth > 0 && open.pop() {
				loops--
			}
		}
		at := r.Pos
		if _, err := wasmbin.SkipImmediates(r, op); err != nil {
			return fmt.Errorf("opcode 0x%02x at body offset %d: %w", op, r.Pos, err)
		}
		if op == 0xfc && (&wasmbin.Reader{Buf: r.Buf, Pos: at}).U32() == 15 { // table.grow
			s.tableGrow = true
		}
		switch op {
		case 0x04, 0x0c, 0x0d: // if, br, br_if
			branches++
		case 0x0e: // br_table: its count of targets plus the default
			t := &wasmbin.Reader{Buf: r.Buf, Pos: at}
			branches += int(t.U32()) + 1
		default:
			continue
		}
		if branches > l.MaxBranches {
			return &CapError{Cap: "max_branches", Limit: l.MaxBranches, Got: uint64(branches), Function: fn}
		}
	}
	if r.Err != nil {
		return r.Err
	}
	if branches > s.maxBranches {
		s.maxBranches, s.maxBranchesFunc = branches, fn
	}
	if depth != 0 {
		return errors.New("unbalanced block ends")
	}
	return nil
}

// bitStack is a stack of booleans, 64 to a word.
type bitStack struct {
	w []uint64
	n int
}

func (s *bitStack) push(v bool) {
	if s.n/64 == len(s.w) {
		s.w = append(s.w, 0)
	}
	if v {
		s.w[s.n/64] |= 1 << (s.n % 64)
	} else {
		s.w[s.n/64] &^= 1 << (s.n % 64)
	}
	s.n++
}

func (s *bitStack) pop() bool {
	if s.n == 0 {
		return false
	}
	s.n--
	return s.w[s.n/64]&(1<<(s.n%64)) != 0
}
