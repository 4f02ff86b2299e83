package runtime

import (
	"context"
	"errors"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// growPageByPage grows the memory one page at a time until memory.grow refuses, then
// stores 7 in its last byte and loads it back: status 0 when it reads 7.
func growPageByPage() []byte {
	return concat(
		[]byte{0x03, 0x40}, wasmtest.I32Const(1), []byte{0x40, 0x00}, // loop: memory.grow 1
		wasmtest.I32Const(-1), []byte{0x47, 0x0d, 0x00, 0x0b}, // i32.ne; br_if 0; end
		[]byte{0x3f, 0x00}, wasmtest.I32Const(16), []byte{0x74}, wasmtest.I32Const(1), []byte{0x6b}, // memory.size << 16 - 1
		wasmtest.I32Const(7), []byte{0x3a, 0x00, 0x00}, // i32.store8
		[]byte{0x3f, 0x00}, wasmtest.I32Const(16), []byte{0x74}, wasmtest.I32Const(1), []byte{0x6b},
		[]byte{0x2d, 0x00, 0x00}, wasmtest.I32Const(7), []byte{0x47}, // i32.load8_u; i32.ne
	)
}

// TestGuestMemoryGrowsOutsideTheHeap: a guest growing its memory a page at a time up to the
// limit leaves no garbage in the host's heap, whichever way its memory is held: a mapping
// grows in place (guestmem.go), and the fallback slice by doubling. wazero's default copied
// the memory into a new slice every few pages: 552 MB resident for a 128 MiB limit.
func TestGuestMemoryGrowsOutsideTheHeap(t *testing.T) {
	const pages = 2048 // 128 MiB, the default limit
	for _, tc := range []struct {
		name    string
		mapped  bool
		maxHeap uint64 // allocated on the Go heap during the call, at most
	}{
		{"mapped", true, 16 << 20},
		// Doubling allocates the memory's size once more at most, in all.
		{"Go slice", false, 2*pages*PageBytes + 16<<20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testEngine(t)
			if !tc.mapped {
				e.memories.max = 0
			} else if e.memories.max == 0 {
				t.Skip("no mapped guest memories on this platform")
			}
			ten, err := e.Tenant("t-grow", TenantLimits{MemoryPages: pages})
			if err != nil {
				t.Fatal(err)
			}
			m, err := e.Compile(context.Background(), "grow.wasm", handleModule(nil, growPageByPage()), ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			var before, after goruntime.MemStats
			goruntime.ReadMemStats(&before)
			var out Result
			err = p.CallInto(context.Background(), &Input{ID: "m"}, &out)
			goruntime.ReadMemStats(&after)
			if err != nil || out.Verdict != VerdictOK {
				t.Fatalf("status %v, err %v: want ok (the last byte of the grown memory holds what was stored)", out.Verdict, err)
			}
			if got := e.memories.live.Load(); tc.mapped != (got > 0) {
				t.Fatalf("%d mapped memories after the call; want them mapped: %v", got, tc.mapped)
			}
			if out.Usage.MemoryBytes != pages*PageBytes {
				t.Fatalf("memory %d bytes after growing to the limit; want %d", out.Usage.MemoryBytes, pages*PageBytes)
			}
			if d := after.TotalAlloc - before.TotalAlloc; d > tc.maxHeap {
				t.Fatalf("growing a memory to %d MiB allocated %d MiB on the host's heap; want at most %d MiB",
					pages*PageBytes>>20, d>>20, tc.maxHeap>>20)
			}
		})
	}
}

// TestGuestMemoryUnmappedWhenUnreachable: a closed pool's mappings are released once its
// instances are unreachable, so a host that replaces instances (after traps, on reloads)
// does not run out of the kernel's memory areas.
func TestGuestMemoryUnmappedWhenUnreachable(t *testing.T) {
	e := testEngine(t)
	if e.memories.max == 0 {
		t.Skip("no mapped guest memories on this platform")
	}
	ten, err := e.Tenant("t-unmap", TenantLimits{MemoryPages: 16})
	if err != nil {
		t.Fatal(err)
	}
	// A trap discards its instance and the pool makes another.
	m, err := e.Compile(context.Background(), "trap.wasm", handleModule(nil, []byte{0x00}), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: time.Minute, MinInstances: 2, MaxInstances: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := p.CallInto(context.Background(), &Input{ID: "m"}, &Result{}); err == nil {
			t.Fatalf("call %d: the guest traps; want an error", i)
		}
	}
	if e.memories.live.Load() == 0 {
		t.Fatal("no guest memory mapped after 20 calls")
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.memories.live.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d guest memories still mapped 30 s after their pool closed", e.memories.live.Load())
		}
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTenantStaysOpenUnderLateCalls: a pool closed before its calls returned (its close's
// context ended first) keeps its tenant's runtime open until they have: closing the runtime
// closes its modules, memories included, under the running guest.
func TestTenantStaysOpenUnderLateCalls(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("t-late", TenantLimits{MemoryPages: 16})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(context.Background(), "spin.wasm", handleModule(nil, wasmtest.Forever(), wasmtest.I32Const(0)), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 2 * time.Second
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: limit, MaxInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.CallInto(context.Background(), &Input{ID: "m"}, &Result{}) }()
	deadline := time.Now().Add(30 * time.Second)
	for p.Stats().Busy == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the call never started")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := p.Close(ctx); err == nil {
		t.Fatal("pool closed with its call still spinning; want the close to give up waiting")
	}
	if err := ten.Close(context.Background()); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("tenant close under a running call: %v; want its runtime kept open", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("the spinning call ended with %v; want its time limit", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the spinning call did not end at its time limit")
	}
	for ten.late.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the closed pool's call returned, but the tenant still counts it running")
		}
		time.Sleep(time.Millisecond)
	}
	if err := ten.Close(context.Background()); err != nil {
		t.Fatalf("tenant close after the call returned: %v", err)
	}
}
