package wasmtest

import "encoding/binary"

// Budget probes (issue #37, faulttest's TestFaultBudget): legal modules — each fits every
// structural cap of runtime.CompileLimits at its defaults and the ABI it declares — whose
// memory or CPU cost on the host is far above what their size or their tenant's limits say.
// They are generated here so that no megabytes of wasm are committed.

// TypeBomb returns a wqhost/v1 module whose type section holds types distinct function
// types of params parameters each (i32 or i64 after the bits of the type's index, so no two
// are equal for types up to 65,536 and params of at least 16), which no function uses,
// besides the wqhost_abi_v1 marker () -> (), a wqhost_handle () -> i32 returning 0 and an
// exported memory of one page. Its size is about types × params bytes. Measured on wazero
// 1.12 (8,000 × 1,000, 8 MB): `wqhost call` took 19 s and the host process peaked at 819 MB
// after a compile child of about 600 MB, since wazero builds an entry preamble for every
// type in process on every load, cache hit or not; runtime's max_type_values now refuses
// more than 50,000 parameters and results in one pass.
func TypeBomb(types, params int) []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	// Type 0 is wqhost_handle's () -> i32, type 1 the marker's () -> (); the bomb follows.
	ts := uleb(nil, types+2)
	ts = append(ts, 0x60, 0x00, 0x01, I32, 0x60, 0x00, 0x00)
	for i := range types {
		ts = uleb(append(ts, 0x60), params)
		for j := range params {
			if i>>(j%16)&1 == 1 {
				ts = append(ts, I64)
			} else {
				ts = append(ts, I32)
			}
		}
		ts = append(ts, 0x00) // no results
	}
	funcs := []byte{0x02, 0x00, 0x01} // wqhost_handle: type 0, wqhost_abi_v1: type 1
	code := []byte{0x02}
	handle := append(append([]byte{0x00}, I32Const(0)...), 0x0b)
	code = append(uleb(code, len(handle)), handle...)
	code = append(code, 0x02, 0x00, 0x0b) // the marker: no locals, end
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, ts)
	mod = section(mod, 3, funcs)
	mod = section(mod, 5, []byte{0x01, 0x00, 0x01})
	mod = section(mod, 7, exports(
		export{"wqhost_abi_v1", 0x00, 1}, export{"wqhost_handle", 0x00, 0}, export{"memory", 0x02, 0}))
	return section(mod, 10, code)
}

// BigModule returns a wqhost/v1 module of about size bytes: functions of straight-line
// bodies of funcBytes bytes each (i32.const; drop pairs, StraightLine), every one under the
// default max_function_bytes when funcBytes is, besides the wqhost_abi_v1 marker and a
// wqhost_handle () -> i32 that pushes and drops version and returns 0. Modules of different
// versions differ in that constant only, so each is a new module to compile (a hot swap) at the same cost. Its
// compile costs the optimizing compiler memory in proportion to its size: four bindings of
// four 20 MB versions took a host and its compile children to 2,959 MiB at start.
func BigModule(size, funcBytes int, version int32) []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	n := max(size/funcBytes, 1)
	body := append([]byte{0x00}, StraightLine(funcBytes)...) // no locals
	body = append(body, 0x1a, 0x0b)                          // drop StraightLine's result; end
	funcs := uleb(nil, n+2)
	funcs = append(funcs, 0x00, 0x01) // wqhost_handle: type 0, wqhost_abi_v1: type 1
	for range n {
		funcs = append(funcs, 0x01)
	}
	code := uleb(nil, n+2)
	handle := append(append([]byte{0x00}, I32Const(version)...), 0x1a) // i32.const version; drop
	handle = append(append(handle, I32Const(0)...), 0x0b)              // return 0 (ok)
	code = append(uleb(code, len(handle)), handle...)
	code = append(code, 0x02, 0x00, 0x0b)
	for range n {
		code = append(uleb(code, len(body)), body...)
	}
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, []byte{0x02, 0x60, 0x00, 0x01, I32, 0x60, 0x00, 0x00})
	mod = section(mod, 3, funcs)
	mod = section(mod, 5, []byte{0x01, 0x00, 0x01})
	mod = section(mod, 7, exports(
		export{"wqhost_abi_v1", 0x00, 1}, export{"wqhost_handle", 0x00, 0}, export{"memory", 0x02, 0}))
	return section(mod, 10, code)
}

// Recursion returns a wqhost/v1 module whose handler calls itself without end, each frame
// holding locals i64 locals across the call (set before it, summed into memory after, so
// the compiler keeps them in the frame: a frame of locals × 8 bytes and more).
func Recursion(locals int) []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	body := []byte{0x00}
	if locals > 0 {
		body = append(uleb([]byte{0x01}, locals), I64)
	}
	for j := range locals {
		body = uleb(append(AppendSLEB(append(body, 0x42), int64(j+1)), 0x21), j) // i64.const; local.set
	}
	body = append(body, 0x10, 0x00) // call 0 (itself)
	if locals > 0 {
		body = append(body, I32Const(0)...)
		for j := range locals {
			body = uleb(append(body, 0x20), j) // local.get
			if j > 0 {
				body = append(body, 0x7c) // i64.add
			}
		}
		body = append(body, 0x37, 0x03, 0x00) // i64.store
	}
	body = append(body, 0x0b)
	code := append(uleb([]byte{0x02}, len(body)), body...)
	code = append(code, 0x02, 0x00, 0x0b) // the marker
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, []byte{0x02, 0x60, 0x00, 0x01, I32, 0x60, 0x00, 0x00})
	mod = section(mod, 3, []byte{0x02, 0x00, 0x01})
	mod = section(mod, 5, []byte{0x01, 0x00, 0x01})
	mod = section(mod, 7, exports(
		export{"wqhost_handle", 0x00, 0}, export{"wqhost_abi_v1", 0x00, 1}, export{"memory", 0x02, 0}))
	return section(mod, 10, code)
}

// Globals returns a wqhost/v1 module (marker, wqhost_handle () -> i32 returning 0, a
// memory) that also defines n mutable i32 globals: 5 bytes each in the module, about 90 on
// the host's heap in every instance of it (runtime's max_globals).
func Globals(n int) []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	gs := uleb(nil, n)
	for range n {
		gs = append(gs, I32, 0x01, 0x41, 0x00, 0x0b) // mutable i32 = i32.const 0
	}
	code := []byte{0x02}
	handle := append(append([]byte{0x00}, I32Const(0)...), 0x0b)
	code = append(uleb(code, len(handle)), handle...)
	code = append(code, 0x02, 0x00, 0x0b)
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, []byte{0x02, 0x60, 0x00, 0x01, I32, 0x60, 0x00, 0x00})
	mod = section(mod, 3, []byte{0x02, 0x00, 0x01})
	mod = section(mod, 5, []byte{0x01, 0x00, 0x01})
	mod = section(mod, 6, gs)
	mod = section(mod, 7, exports(
		export{"wqhost_handle", 0x00, 0}, export{"wqhost_abi_v1", 0x00, 1}, export{"memory", 0x02, 0}))
	return section(mod, 10, code)
}

// ExtismAlloc is extism:host/env's alloc(n i64) -> i64.
var ExtismAlloc = Import{Module: "extism:host/env", Name: "alloc", Params: []byte{I64}, Results: []byte{I64}}

// ExtismAllocator returns an Extism plugin (abi extism) whose handle () -> i32 allocates
// blocks of block bytes from the Extism kernel in an endless loop: the host's arena grows
// until the tenant's memory limit traps the call. Measured before issue #37's budget, one
// such call with 1 MiB blocks and a 128 MiB limit took the host to 542 MB of resident
// memory (456 MB with 1-byte blocks, whose records cost more than their bytes), and eight
// on one tenant to 1,315 MiB.
func ExtismAllocator(block int64) []byte {
	body := Forever(I64Const(block), Call(0), Drop)
	return Spec{Imports: []Import{ExtismAlloc}, Funcs: []Func{{Export: "handle", Results: []byte{I32}, Body: append(body, I32Const(0)...)}}}.Bytes()
}

// SlowStartTrap returns a wqhost/v1 module whose start function (_initialize) counts to n
// in a loop (a counter in memory, so no locals) and whose wqhost_handle traps: every
// message discards its instance, so the next one pays the start function again. With n =
// 3·10⁸ that is a second or more of CPU per message, spent outside any handler call.
func SlowStartTrap(n int32) []byte {
	// loop: mem[0] = mem[0] + 1; br_if 0 (mem[0] < n) — unsigned, so n up to 2³¹-1.
	count := append(I32Const(0), Load32(0)...)
	count = append(count, I32Const(1)...)
	count = append(count, 0x6a, 0x36, 0x02, 0x00) // i32.add; i32.store
	count = append(count, Load32(0)...)
	count = append(count, I32Const(n)...)
	count = append(count, 0x49, 0x0d, 0x00) // i32.lt_u; br_if 0
	initialize := append(append([]byte{0x03, 0x40}, count...), 0x0b)
	return Spec{Funcs: []Func{
		{Export: "wqhost_abi_v1"},
		{Export: "_initialize", Body: initialize},
		Handle([]byte{0x00}), // unreachable
	}}.Bytes()
}

// export is one entry of an export section.
type export struct {
	name  string
	kind  byte // 0x00 function, 0x02 memory
	index int
}

func exports(es ...export) []byte {
	b := binary.AppendUvarint(nil, uint64(len(es)))
	for _, e := range es {
		b = append(binary.AppendUvarint(b, uint64(len(e.name))), e.name...)
		b = binary.AppendUvarint(append(b, e.kind), uint64(e.index))
	}
	return b
}

func section(mod []byte, id byte, payload []byte) []byte {
	mod = binary.AppendUvarint(append(mod, id), uint64(len(payload)))
	return append(mod, payload...)
}
