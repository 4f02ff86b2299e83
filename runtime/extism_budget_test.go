package runtime

import (
	"context"
	"errors"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// Extism kernel memory under the memory budget (extism_kernel.go): what it costs the host,
// its reuse of freed blocks, the budget's refusal and the time limit.

// Instructions the plugins below need beyond wasmtest's.
var (
	localGet = func(i byte) []byte { return []byte{0x20, i} }
	localSet = func(i byte) []byte { return []byte{0x21, i} }
	localTee = func(i byte) []byte { return []byte{0x22, i} }
)

const (
	opI64Add  = 0x7c
	opI64LtU  = 0x54
	opI64RemU = 0x82
	opWrap    = 0xa7
	opI32Shl  = 0x74
	opBrIf0   = 0x0d
)

// kernelPlugin is a plugin of handle (calling helper once with zero arguments) and helper,
// whose parameters (all i64 but an i32 last where i32Last) serve it as locals.
func kernelPlugin(params []byte, body ...[]byte) []byte {
	zeros := []byte{}
	for _, p := range params {
		if p == wasmtest.I64 {
			zeros = append(zeros, wasmtest.I64Const(0)...)
		} else {
			zeros = append(zeros, wasmtest.I32Const(0)...)
		}
	}
	helper := len(extImports) + 1
	return wasmtest.Spec{Imports: extImports, Funcs: []wasmtest.Func{
		{Export: "handle", Results: []byte{wasmtest.I32}, Body: cat(zeros, wasmtest.Call(helper), wasmtest.I32Const(0))},
		{Export: "helper", Params: params, Body: cat(body...)},
	}}.Bytes()
}

// fillingMiBs allocates 1 MiB blocks for ever and writes a byte into every 4 KiB of each, as
// a plugin filling its blocks does: (block, i) are locals 0 and 1.
func fillingMiBs() []byte {
	return kernelPlugin([]byte{wasmtest.I64, wasmtest.I64}, wasmtest.Forever(
		wasmtest.I64Const(1<<20), wasmtest.Call(xAlloc), localSet(0),
		wasmtest.I64Const(0), localSet(1),
		[]byte{0x03, 0x40}, // loop
		localGet(0), localGet(1), []byte{opI64Add}, wasmtest.I32Const(1), wasmtest.Call(xStoreU8),
		localGet(1), wasmtest.I64Const(4096), []byte{opI64Add}, localTee(1),
		wasmtest.I64Const(1<<20), []byte{opI64LtU, opBrIf0, 0x00, 0x0b}, // br_if 0; end
	))
}

// procStatusKiB reads a "Name:   N kB" field of /proc/self/status.
func procStatusKiB(t *testing.T, name string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, v, err)
			}
			return kb
		}
	}
	t.Skipf("no %s in /proc/self/status", name)
	return 0
}

// resetPeakRSSForTest makes VmHWM the resident size now (clear_refs 5), so that it shows the peak
// of what follows; it skips where the kernel does not support that.
func resetPeakRSSForTest(t *testing.T) int64 {
	t.Helper()
	goruntime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident size: %v", err)
	}
	rss, hwm := procStatusKiB(t, "VmRSS"), procStatusKiB(t, "VmHWM")
	if hwm > rss+1024 {
		t.Skipf("clear_refs 5 left VmHWM at %d kB beside VmRSS %d kB: no peak reset in this kernel", hwm, rss)
	}
	return rss
}

// TestExtismKernelBudgetRSS: a plugin filling 1 MiB blocks up to its kernel memory's limit
// costs the host its limit in resident memory and a constant, not several times it: the
// arena grew by copies left as garbage (542 MB resident at a 128 MiB limit). The budget's
// kernel reservation covers what was resident.
func TestExtismKernelBudgetRSS(t *testing.T) {
	const pages = 2048 // 128 MiB
	const limit = pages * PageBytes
	const slack = 32 << 20
	p := extPoolLimited(t, fillingMiBs(), PoolConfig{Timeout: time.Minute}, pages)
	base := resetPeakRSSForTest(t)
	_, err := p.Call(context.Background(), &Input{ID: "m1"})
	peak := procStatusKiB(t, "VmHWM")
	// The tenant's peak reservation less its instance memory, which stays reserved: the
	// kernel's peak.
	u := p.t.MemoryBudget()
	reserved := u.Peak - u.ByConsumer[ConsumerInstances.Key()]
	if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "past its limit") {
		t.Fatalf("err %v, want a trap: kernel memory past its limit", err)
	}
	grew := (peak - base) << 10
	t.Logf("budget kernel: reserved=%d MiB measured-rss=%d MiB limit=%d MiB", reserved>>20, grew>>20, limit>>20)
	if grew > limit+slack {
		t.Fatalf("the host's peak resident memory grew by %d MiB for a plugin at its kernel memory limit of %d MiB; want at most %d MiB",
			grew>>20, limit>>20, (limit+slack)>>20)
	}
}

// ringPlugin keeps the last depth 1-byte blocks it allocated, freeing the oldest before each
// new one, n times: a queue of pending items. Locals: i (i64), the ring slot's address (i32),
// the ring in the guest's linear memory (whose zeros are free(0), a no-op, the first time).
func ringPlugin(depth, n int64) []byte {
	return kernelPlugin([]byte{wasmtest.I64, wasmtest.I32},
		[]byte{0x03, 0x40}, // loop
		localGet(0), wasmtest.I64Const(depth), []byte{opI64RemU, opWrap}, wasmtest.I32Const(3), []byte{opI32Shl}, localTee(1),
		[]byte{0x29, 0x03, 0x00}, wasmtest.Call(xFree), // free(ring[slot])
		localGet(1), wasmtest.I64Const(1), wasmtest.Call(xAlloc), []byte{0x37, 0x03, 0x00}, // ring[slot] = alloc(1)
		localGet(0), wasmtest.I64Const(1), []byte{opI64Add}, localTee(0),
		wasmtest.I64Const(n), []byte{opI64LtU, opBrIf0, 0x00, 0x0b},
	)
}

// TestExtismKernelBudgetReuse: 1-byte blocks allocated and freed for ever reuse the freed
// ones, wherever they are: a queue of 100 pending blocks cycled 100,000 times fits in a
// 64 KiB kernel memory. Reuse looked only at the latest 64 blocks: the queue's oldest, freed,
// were never reused and the kernel memory grew to its limit.
func TestExtismKernelBudgetReuse(t *testing.T) {
	for _, mapped := range []bool{true, false} {
		t.Run(map[bool]string{true: "mapped", false: "Go slice"}[mapped], func(t *testing.T) {
			p := extPoolLimited(t, ringPlugin(100, 100_000), PoolConfig{}, 1)
			if !mapped {
				p.t.e.memories.max = 0
			}
			for i := range 2 {
				if _, err := p.Call(context.Background(), &Input{ID: "m1"}); err != nil {
					t.Fatalf("call %d: %v; want the queue's blocks reused within 64 KiB", i, err)
				}
			}
		})
	}
}

// TestExtismKernelBudgetRefused: a tenant whose memory budget is smaller than what its plugin
// allocates gets the budget's refusal as the call's reason, as a trap (alloc's way past its
// limit); the kernel's reservation goes back once the pool closes.
func TestExtismKernelBudgetRefused(t *testing.T) {
	t.Run("mapped", func(t *testing.T) { testKernelBudgetRefused(t, true) })
	t.Run("Go slice", func(t *testing.T) { testKernelBudgetRefused(t, false) })
}

func testKernelBudgetRefused(t *testing.T, mapped bool) {
	e := testEngine(t)
	if !mapped {
		e.memories.max = 0
	}
	m, err := e.Compile(context.Background(), "plugin.wasm", extPlugin(wasmtest.Forever(wasmtest.I64Const(1<<20), wasmtest.Call(xAlloc), []byte{drop}), wasmtest.I32Const(0)), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	ten, err := e.Tenant("small", TenantLimits{MemoryPages: 2048, MemoryBudgetBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: 10 * time.Second, MinInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		_, err = p.Call(context.Background(), &Input{ID: "m1"})
		// The budget's word, as for every consumer (Pool.failure), not the guest's trap.
		if !errors.Is(err, ErrMemoryBudget) || errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "kernel memory") {
			t.Fatalf("call %d: err %v, want the tenant's memory budget refusing kernel memory", i, err)
		}
	}
	if u := ten.MemoryBudget(); u.Refused == 0 || u.Peak > 8<<20 {
		t.Fatalf("budget %+v: want refusals, and never more than its 8 MiB reserved", u)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ten.MemoryBudget().ByConsumer[ConsumerKernel.Key()]; got != 0 {
		t.Fatalf("%d bytes of kernel memory still reserved after the pool closed; want 0", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for ten.MemoryBudget().Reserved != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("budget %+v 30 s after the pool closed; want nothing reserved", ten.MemoryBudget())
		}
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExtismKernelBudgetTimeLimit: a plugin filling its kernel memory block by block ends at
// its time limit: growing the kernel memory copies nothing that could run past it.
func TestExtismKernelBudgetTimeLimit(t *testing.T) {
	const limit = time.Second
	// Every byte written (store_u8), 1 MiB blocks without end: far slower than 1 s to fill
	// 1 GiB, so the time limit, not the memory limit, ends it.
	body := kernelPlugin([]byte{wasmtest.I64, wasmtest.I64}, wasmtest.Forever(
		wasmtest.I64Const(1<<20), wasmtest.Call(xAlloc), localSet(0),
		wasmtest.I64Const(0), localSet(1),
		[]byte{0x03, 0x40},
		localGet(0), localGet(1), []byte{opI64Add}, wasmtest.I32Const(1), wasmtest.Call(xStoreU8),
		localGet(1), wasmtest.I64Const(1), []byte{opI64Add}, localTee(1),
		wasmtest.I64Const(1<<20), []byte{opI64LtU, opBrIf0, 0x00, 0x0b},
	))
	p := extPoolLimited(t, body, PoolConfig{Timeout: limit}, 16384)
	start := time.Now()
	_, err := p.Call(context.Background(), &Input{ID: "m1"})
	if took := time.Since(start); !errors.Is(err, ErrTimeout) || took > limit+5*time.Second {
		t.Fatalf("err %v after %s, want ErrTimeout near %s", err, took, limit)
	}
}
