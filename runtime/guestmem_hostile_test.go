package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// Hostile guests against the guest memories of guestmem.go: what one instance leaves in its
// memory, memories at and past their bounds, and churn past the engine's mapping bounds.

// Instructions of the guests below.
var (
	memGrow  = []byte{0x40, 0x00}
	memSize  = []byte{0x3f, 0x00}
	i32Load  = []byte{0x28, 0x02, 0x00}
	i32Store = []byte{0x36, 0x02, 0x00}
	i32Ne    = []byte{0x47}
	i32Eq    = []byte{0x46}
	i32Sub   = []byte{0x6b}
	i32Or    = []byte{0x72}
	load8U   = []byte{0x2d, 0x00, 0x00}
	store8   = []byte{0x3a, 0x00, 0x00}
)

// failIf returns the code returning status rc when the i32 on the stack is not 0.
func failIf(rc int32) []byte {
	return concat([]byte{0x04, 0x40}, wasmtest.I32Const(rc), []byte{0x0f, 0x0b})
}

// memPool is a pool of one instance at most of the wqhost/v1 module spec, in a tenant limited
// to pages, with guest memories mapped or (mapped false) Go slices.
func memPool(t *testing.T, spec wasmtest.Spec, pages uint32, mapped bool) (*Engine, *Pool) {
	t.Helper()
	e := testEngine(t)
	if !mapped {
		e.memories.max = 0
	} else if e.memories.max == 0 {
		t.Skip("no mapped guest memories on this platform")
	}
	ten, err := e.Tenant("t-mem", TenantLimits{MemoryPages: pages})
	if err != nil {
		t.Fatal(err)
	}
	spec.Funcs = append([]wasmtest.Func{{Export: "wqhost_abi_v1"}}, spec.Funcs...)
	m, err := e.Compile(context.Background(), "mem.wasm", spec.Bytes(), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: time.Minute, MaxInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return e, p
}

// TestGuestMemoryFreshInstanceReadsZeros: an instance that replaces a trapped one never sees
// what the trapped one wrote, in its first page or in one it grew, whether memories are
// mappings (whose pages the kernel may hand out again once unmapped) or Go slices. The guest
// grows a page, returns 1 (retry) if either word it checks is not 0, and otherwise writes a
// secret in both and traps, so every call must trap.
func TestGuestMemoryFreshInstanceReadsZeros(t *testing.T) {
	const secret = 0x5ec2e7
	body := concat(
		wasmtest.I32Const(1), memGrow, wasmtest.Drop,
		wasmtest.I32Const(8), i32Load, wasmtest.I32Const(PageBytes+8), i32Load, i32Or, failIf(1),
		wasmtest.I32s(8, secret), i32Store,
		wasmtest.I32s(PageBytes+8, secret), i32Store,
		[]byte{0x00}, // unreachable
		wasmtest.I32Const(0),
	)
	for _, mapped := range []bool{true, false} {
		t.Run(fmt.Sprintf("mapped=%v", mapped), func(t *testing.T) {
			e, p := memPool(t, wasmtest.Spec{Funcs: []wasmtest.Func{wasmtest.Handle(body)}}, 256, mapped)
			for i := range 40 {
				out, err := p.Call(context.Background(), &Input{ID: fmt.Sprintf("m%d", i)})
				if !errors.Is(err, ErrTrap) {
					t.Fatalf("call %d: output %+v, err %v: want a trap; status 1 means the instance saw the secret its trapped predecessor wrote", i, out, err)
				}
				if i%8 == 7 {
					// Unmap the dropped instances' mappings, so new ones may take their addresses.
					goruntime.GC()
				}
			}
			if mapped && e.memories.live.Load() == 0 {
				t.Fatal("no guest memory mapped: the test ran on Go slices only")
			}
		})
	}
}

// TestGuestMemoryBounds: a memory keeps what was written in it as it grows, grows to exactly
// its maximum (the tenant's limit, or the module's where it declares less, down to 0 pages)
// and not one page more, whether it is a mapping or a Go slice; a mapping reserves that
// maximum, no more.
func TestGuestMemoryBounds(t *testing.T) {
	u32 := func(v uint32) *uint32 { return &v }
	for _, tc := range []struct {
		name     string
		limit    uint32  // the tenant's, in pages
		min      uint32  // the module's minimum
		declared *uint32 // the module's maximum; nil: none
		max      uint32  // the memory's maximum: the lesser of limit and declared
	}{
		{"no maximum declared", 256, 1, nil, 256},
		{"maximum below the limit", 256, 1, u32(4), 4},
		{"maximum at the limit", 256, 2, u32(256), 256},
		{"minimum at the maximum", 256, 4, u32(4), 4},
		{"maximum of 0 pages", 256, 0, u32(0), 0},
	} {
		body := []byte{}
		if tc.min > 0 {
			body = concat(body, wasmtest.I32s(100, 0x55), store8)
		}
		body = concat(body,
			wasmtest.I32Const(int32(tc.max)), memSize, i32Sub, memGrow, wasmtest.I32Const(-1), i32Eq, failIf(11),
			wasmtest.I32Const(1), memGrow, wasmtest.I32Const(-1), i32Ne, failIf(12),
			memSize, wasmtest.I32Const(int32(tc.max)), i32Ne, failIf(13))
		if tc.max > 0 {
			last := int32(tc.max*PageBytes - 1)
			body = concat(body, wasmtest.I32s(last, 7), store8, wasmtest.I32Const(last), load8U, wasmtest.I32Const(7), i32Ne, failIf(14))
		}
		if tc.min > 0 {
			body = concat(body, wasmtest.I32Const(100), load8U, wasmtest.I32Const(0x55), i32Ne, failIf(15))
		}
		body = concat(body, wasmtest.I32Const(0))
		spec := wasmtest.Spec{Funcs: []wasmtest.Func{wasmtest.Handle(body)}, MemPages: tc.min, MemMax: tc.declared}
		for _, mapped := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/mapped=%v", tc.name, mapped), func(t *testing.T) {
				e, p := memPool(t, spec, tc.limit, mapped)
				for i := range 2 { // the second on the memory the first grew
					var out Result
					if err := p.CallInto(context.Background(), &Input{ID: "m"}, &out); err != nil || out.Verdict != VerdictOK {
						t.Fatalf("call %d: status %v, err %v: want ok (11: growing to the maximum, 12: one page past it, 13: the size, 14: the last byte, 15: the data written before growing)",
							i, out.Verdict, err)
					}
					if out.Usage.MemoryBytes != uint64(tc.max)*PageBytes {
						t.Fatalf("call %d: memory %d bytes after the call; want %d", i, out.Usage.MemoryBytes, tc.max*PageBytes)
					}
				}
				live, reserved := e.memories.live.Load(), e.memories.reserved.Load()
				if want := mapped && tc.max > 0; want != (live == 1) {
					t.Fatalf("%d guest memories mapped; want the instance's mapped: %v", live, want)
				}
				if reserved != live*int64(tc.max)*PageBytes {
					t.Fatalf("%d mappings reserve %d bytes; want %d pages each", live, reserved, tc.max)
				}
			})
		}
	}
}

// TestGuestMemoryClosedUnderARunningCall: a tenant whose pool's Close gave up waiting for a
// call in flight (as a shutdown's grace does) keeps its runtime open until the call returns
// (TestTenantStaysOpenUnderLateCalls). Should the runtime be closed under the call all the
// same (here directly), wazero closes the running module and frees its memory under the
// guest, which goes on filling it until its time limit stops it: the guest writes to dropped
// pages, never to an unmapped one (which would end the host with SIGSEGV), whether the time
// limit is the fuel counter or close-on-context-done (a module the fuel instrumenter cannot
// read).
func TestGuestMemoryClosedUnderARunningCall(t *testing.T) {
	const pages = 64
	// Grow to the limit, log a line, then fill the whole memory for ever. The test closes the
	// runtime once it saw the line: wazero 1.12's Grow reads a field its runtime's Close writes
	// (unsynchronised, a data race of wazero's own), so the grow must be over by then.
	logImport := []wasmtest.Import{{Module: "wqhost", Name: "log", Params: []byte{wasmtest.I32, wasmtest.I32, wasmtest.I32}}}
	wasm := wasmtest.ModuleImporting(logImport, 1, wasmtest.Func{Export: "wqhost_abi_v1"}, wasmtest.Handle(concat(
		wasmtest.I32Const(pages-1), memGrow, wasmtest.Drop,
		wasmtest.I32s(0, 0, 4), wasmtest.Call(0),
		wasmtest.Forever(wasmtest.MemoryFill(0, 0x5a, pages*PageBytes)),
		wasmtest.I32Const(0))))
	for _, fuel := range []bool{true, false} {
		t.Run(fmt.Sprintf("fuel=%v", fuel), func(t *testing.T) {
			filling := make(chan struct{})
			var once sync.Once
			e := engineLoggingTo(t, writerFunc(func(b []byte) (int, error) {
				if bytes.Contains(b, []byte("source=guest")) {
					once.Do(func() { close(filling) })
				}
				return len(b), nil
			}))
			if e.memories.max == 0 {
				t.Skip("no mapped guest memories on this platform")
			}
			ten, err := e.Tenant("t-closed", TenantLimits{MemoryPages: pages})
			if err != nil {
				t.Fatal(err)
			}
			m, err := e.Compile(context.Background(), "fill.wasm", wasm, ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			if !fuel {
				m.c.fuel = nil // as for a module the instrumenter cannot read
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: 2 * time.Second, MaxInstances: 1})
			if err != nil {
				t.Fatal(err)
			}
			if p.v.fuel != fuel || p.v.terminate == fuel {
				t.Fatalf("pool variant %+v; want fuel %v", p.v, fuel)
			}
			done := make(chan error, 1)
			go func() {
				_, err := p.Call(context.Background(), &Input{ID: "m"})
				done <- err
			}()
			select {
			case <-filling:
			case err := <-done:
				t.Fatalf("the call returned before it logged: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("the guest did not log its line within a minute")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if err := p.Close(ctx); err == nil {
				t.Fatal("the pool closed with its call in flight")
			}
			if err := ten.Close(context.Background()); err == nil || !strings.Contains(err.Error(), "still running") {
				t.Fatalf("tenant close under a running call: %v; want its runtime kept open", err)
			}
			if err := p.rt.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			var err2 error
			for running := true; running; {
				goruntime.GC()
				select {
				case err2 = <-done:
					running = false
				case <-time.After(20 * time.Millisecond):
				case <-time.After(time.Minute):
					t.Fatal("the call under a 2 s limit still runs a minute on")
				}
			}
			if err2 == nil {
				t.Fatal("the call whose module was closed under it succeeded")
			}
			waitFor(t, "its memory unmapped", func() bool {
				goruntime.GC()
				return e.memories.live.Load() == 0
			})
		})
	}
}

// writerFunc is an io.Writer calling itself.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestModuleWithoutMemoryRefused: a module with no memory is refused at load, naming the
// missing export: the host reads every instance's memory size after each call (meter.go),
// and wazero answers Memory() of such a module with a nil *MemoryInstance in a non-nil
// interface, whose Size would panic in the host's goroutine.
func TestModuleWithoutMemoryRefused(t *testing.T) {
	e := testEngine(t)
	noMemory := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x08, 0x02, 0x60, 0x00, 0x01, 0x7f, 0x60, 0x00, 0x00, // types: () -> i32, () -> ()
		0x03, 0x03, 0x02, 0x00, 0x01, // functions
		0x07, 0x21, 0x02, // exports: wqhost_handle, wqhost_abi_v1
		0x0d, 'w', 'q', 'h', 'o', 's', 't', '_', 'h', 'a', 'n', 'd', 'l', 'e', 0x00, 0x00,
		0x0d, 'w', 'q', 'h', 'o', 's', 't', '_', 'a', 'b', 'i', '_', 'v', '1', 0x00, 0x01,
		0x0a, 0x09, 0x02, 0x04, 0x00, 0x41, 0x00, 0x0b, 0x02, 0x00, 0x0b, // code: i32.const 0 / nothing
	}
	_, err := e.Compile(context.Background(), "nomem.wasm", noMemory, ABIWqhostV1)
	if err == nil || !strings.Contains(err.Error(), "missing export memory") {
		t.Fatalf("err = %v; want the module refused for its missing memory", err)
	}
}
