//go:build linux

package runtime

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestGuestMemoryChurnStaysBounded: a guest that traps on every call makes the pool replace
// its instance every time. Past the engine's bounds on mappings, in number and in the address
// space they reserve, memories are Go slices (guestmem.go): the calls go on failing only as
// the guest does, the mappings never pass their bounds, and the process's address space
// grows by no more than they reserve.
func TestGuestMemoryChurnStaysBounded(t *testing.T) {
	const pages = 256 // far enough from the limit that a trap is not taken for running out
	for _, tc := range []struct {
		name          string
		max, maxBytes int64 // the bounds; 0: the engine's own
	}{
		{"engine's bounds", 0, 0},
		{"4 mappings", 4, 0},
		{"3 mappings' address space", 0, 3 * pages * PageBytes},
		{"no address space", 0, PageBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testEngine(t)
			if e.memories.max == 0 {
				t.Skip("no mapped guest memories on this platform")
			}
			if tc.max > 0 {
				e.memories.max = tc.max
			}
			if tc.maxBytes > 0 {
				e.memories.maxBytes = tc.maxBytes
			}
			maxLive := min(e.memories.max, e.memories.maxBytes/(pages*PageBytes))
			ten, err := e.Tenant("t-churn", TenantLimits{MemoryPages: pages})
			if err != nil {
				t.Fatal(err)
			}
			m, err := e.Compile(context.Background(), "trap.wasm", handleModule(nil, []byte{0x00}), ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: time.Minute, MaxInstances: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			before, peak := vmSize(), 0
			const calls = 600
			for i := range calls {
				if err := p.CallInto(context.Background(), &Input{ID: "m"}, &Result{}); !errors.Is(err, ErrTrap) {
					t.Fatalf("call %d: %v; want the guest's trap", i, err)
				}
				live, reserved := e.memories.live.Load(), e.memories.reserved.Load()
				if live > maxLive || reserved > e.memories.maxBytes {
					t.Fatalf("call %d: %d memories mapped reserving %d bytes; the bounds are %d and %d bytes", i, live, reserved, maxLive, e.memories.maxBytes)
				}
				peak = max(peak, int(live))
				if i%25 == 24 {
					// The address space in use, which the kernel does not merge as it may merge
					// adjacent mappings into one area of /proc/self/maps, after a collection
					// unmapped what is unreachable: with mappings (16 MiB each) dropped and
					// never unmapped, it passes this bound within the calls.
					goruntime.GC()
					reserved = e.memories.reserved.Load()
					const slack = 1 << 30 // the Go heap's, new threads' stacks, the other tests'
					if n := vmSize(); n > before+uint64(reserved)+slack {
						t.Fatalf("call %d: %d MiB of address space in use, %d MiB before the first call, with %d MiB mapped for guests",
							i, n>>20, before>>20, reserved>>20)
					}
				}
			}
			if maxLive > 0 && peak == 0 {
				t.Fatal("no guest memory was ever mapped")
			}
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for e.memories.live.Load() != 0 || e.memories.reserved.Load() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%d guest memories (%d bytes) still mapped 30 s after their pool closed", e.memories.live.Load(), e.memories.reserved.Load())
				}
				goruntime.GC()
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestReserveBudget: the address space an engine's mappings may reserve is a quarter of the
// user address space the stack's address shows, and under RLIMIT_AS a quarter of what the
// process's use leaves of it.
func TestReserveBudget(t *testing.T) {
	const inf = math.MaxUint64
	for _, tc := range []struct {
		name              string
		stack, asLim, use uint64
		want              int64
	}{
		{"amd64, no limit", 0x7ffc9f4db710, inf, 2 << 30, 1 << 45},
		{"stack unknown: amd64's", 0, inf, 2 << 30, 1 << 45},
		{"39-bit arm64", 0x7fe5a1c000, inf, 2 << 30, 1 << 37},
		{"RLIMIT_AS", 0x7ffc9f4db710, 12 << 30, 4 << 30, 2 << 30},
		{"RLIMIT_AS already used up", 0x7ffc9f4db710, 12 << 30, 13 << 30, 0},
	} {
		if got := reserveBudget(tc.stack, tc.asLim, tc.use); got != tc.want {
			t.Errorf("%s: reserveBudget(%#x, %d, %d) = %d; want %d", tc.name, tc.stack, tc.asLim, tc.use, got, tc.want)
		}
	}
}

// asLimitChildEnv makes this test binary the child of TestGuestMemoryUnderAddressSpaceLimit.
const asLimitChildEnv = "WQHOST_TEST_AS_LIMIT_CHILD"

// TestGuestMemoryUnderAddressSpaceLimit: a host under an address-space limit (RLIMIT_AS,
// ulimit -v) keeps room for its own heap whatever its guests' memory limits: 16 warm
// instances under a 1 GiB limit, with 8 GiB of address space left, then 1.5 GiB of Go heap.
// When every mapping reserved its maximum, this died with "fatal error: out of memory" below
// 1 GB of heap (no recover catches it, hence the child process).
func TestGuestMemoryUnderAddressSpaceLimit(t *testing.T) {
	if os.Getenv(asLimitChildEnv) != "" {
		asLimitChild(t)
		return
	}
	if newGuestMemories().max == 0 {
		t.Skip("no mapped guest memories on this platform")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGuestMemoryUnderAddressSpaceLimit$", "-test.v")
	cmd.Env = append(os.Environ(), asLimitChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "heap grown") {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		t.Fatalf("child: %v; its first lines:\n%s", err, strings.Join(lines[:min(len(lines), 12)], "\n"))
	}
}

func asLimitChild(t *testing.T) {
	lim := syscall.Rlimit{Cur: vmSize() + 8<<30, Max: math.MaxUint64}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &old); err != nil {
		t.Fatal(err)
	}
	lim.Max = old.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Fatal(err)
	}
	e := testEngine(t)
	ten, err := e.Tenant("t-as", TenantLimits{MemoryPages: 16384}) // 1 GiB
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(context.Background(), "ok.wasm", handleModule(nil, wasmtest.I32Const(0)), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: time.Minute, MinInstances: 16, MaxInstances: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	t.Logf("%d guest memories mapped, reserving %d MiB", e.memories.live.Load(), e.memories.reserved.Load()>>20)
	var heap [][]byte
	for range 24 {
		heap = append(heap, make([]byte, 64<<20))
	}
	if out, err := p.Call(context.Background(), &Input{ID: "m"}); err != nil || out.Verdict != VerdictOK {
		t.Fatalf("status %v, err %v: want ok", out, err)
	}
	t.Logf("heap grown by %d MiB", len(heap)*64)
}
