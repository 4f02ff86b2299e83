package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/memlimit"
	"github.com/wqhost/wqhost/internal/wasmtest"
)

// budgetChildEngine is an engine compiling in child processes (this test binary, TestMain)
// into a fresh cache directory, so that every module's load is measured by a child, with a
// host memory budget (0: unlimited).
func budgetChildEngine(t *testing.T, host int64, childMemory uint64) *Engine {
	t.Helper()
	e, err := NewEngine(context.Background(), EngineConfig{
		CacheDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CompileInChild: true, CompileMemoryBytes: childMemory, MemoryBudgetBytes: host,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// reservedModules is what t's compiled modules hold in its budget.
func reservedModules(t *Tenant) int64 { return t.MemoryBudget().ByConsumer["modules"] }

func mib(n int64) string { return fmt.Sprintf("%.2f", float64(n)/(1<<20)) }

// TestBudgetModules: a module compiled in a child is reserved from its tenant's budget, at
// what the child measured its load to cost plus its bytes, while a pool holds it; a tenant
// whose budget is smaller is refused at NewPool, naming the module; closing the pool gives
// the reservation back. It prints the reservation beside the resident memory the pool's
// creation cost this process.
func TestBudgetModules(t *testing.T) {
	ctx := context.Background()
	e := budgetChildEngine(t, 0, 0)
	wasm, err := os.ReadFile(guestPath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(ctx, "guest.wasm", wasm, ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	if memlimit.Resident() > 0 {
		// What a load reads into memory it maps, at least: the machine code, wazero's files
		// in the cache directory (the engine's own are named wqhost-). A child that measured
		// a load through the cache it compiled with found the code in memory and measured
		// the decoding alone: 6.8 MiB against 9.2 MiB of code.
		code := wazeroCacheBytes(t, e.cacheDir)
		t.Logf("budget load cost: child-measured=%s MiB, machine code in the cache=%s MiB", mib(m.c.loadBytes), mib(code))
		if m.c.loadBytes < code {
			t.Fatalf("the child measured a load of %s at %d bytes; want at least the %d bytes of machine code it maps", m.Name(), m.c.loadBytes, code)
		}
	}
	ten, err := e.Tenant("t", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	// The tenant's runtime (WASI and the host modules) first, so that what is measured below
	// is the module's load.
	warm, err := e.Compile(ctx, "warm.wasm", handleModule(nil, wasmtest.I32Const(0)), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	wp, err := ten.NewPool(ctx, warm, PoolConfig{Binding: "warm", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := wp.Close(ctx); err != nil {
		t.Fatal(err)
	}

	debug.FreeOSMemory()
	before := memlimit.Resident()
	p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	measured := memlimit.Resident() - before
	debug.FreeOSMemory()
	kept := memlimit.Resident() - before
	reserved := reservedModules(ten)
	if reserved <= 0 || reserved < m.c.loadBytes {
		t.Fatalf("a pool of %s holds %d bytes of compiled modules in its tenant's budget; want its load (%d) and bytes", m.Name(), reserved, m.c.loadBytes)
	}
	if host := e.MemoryBudget().ByConsumer["modules"]; host != reserved {
		t.Fatalf("host budget holds %d bytes of compiled modules; want the tenant's %d", host, reserved)
	}
	// measured is the RSS delta right after NewPool, garbage included (what the host must
	// have room for); kept what stayed after a collection.
	fmt.Printf("budget modules: reserved=%s MiB measured-rss=%s MiB (kept after GC %s MiB; child-measured load %s MiB, module %s MiB)\n",
		mib(reserved), mib(measured), mib(kept), mib(m.c.loadBytes), mib(int64(len(wasm))))

	small, err := e.Tenant("small", TenantLimits{MemoryBudgetBytes: reserved / 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = small.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: time.Minute})
	var be *BudgetError
	if !errors.As(err, &be) || be.Consumer != ConsumerModules || !strings.Contains(err.Error(), "module guest.wasm") {
		t.Fatalf("NewPool in a budget of half the module's load: %v; want the budget's refusal naming module guest.wasm", err)
	}
	if got := reservedModules(small); got != 0 {
		t.Fatalf("refused tenant holds %d bytes of compiled modules; want 0", got)
	}

	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := reservedModules(ten); got != 0 {
		t.Fatalf("tenant holds %d bytes of compiled modules after its pool closed; want 0", got)
	}
	if got := e.MemoryBudget().Reserved; got != 0 {
		t.Fatalf("host budget holds %d bytes after every pool closed; want 0", got)
	}
}

// TestBudgetReloadCycle: loading version after version of a binding's module into a pool
// and closing the pool each time, as a hot reload does, leaves nothing of the old versions
// reserved.
func TestBudgetReloadCycle(t *testing.T) {
	ctx := context.Background()
	e := budgetChildEngine(t, 0, 0)
	ten, err := e.Tenant("t", TenantLimits{MemoryBudgetBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for v := range 3 {
		m, err := e.Compile(ctx, fmt.Sprintf("v%d.wasm", v), handleModule(nil, wasmtest.I32Const(int32(v))), ABIWqhostV1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: time.Minute, MinInstances: 1})
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		if out, err := p.Call(ctx, &Input{ID: "m"}); err != nil || int(out.Verdict) != v {
			t.Fatalf("version %d: status %v, err %v", v, out, err)
		}
		held := reservedModules(ten)
		if held <= 0 {
			t.Fatalf("version %d: its pool holds nothing in the budget", v)
		}
		t.Logf("budget reload: version %d reserved=%s MiB (child-measured load %s MiB)", v, mib(held), mib(m.c.loadBytes))
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if got := reservedModules(ten); got != 0 {
			t.Fatalf("version %d: %d bytes of compiled modules reserved after its pool closed; want 0", v, got)
		}
		waitReleased(t, ten, fmt.Sprintf("version %d closed", v))
	}
	if got := e.MemoryBudget().Reserved; got != 0 {
		t.Fatalf("host budget holds %d bytes after three versions came and went; want 0", got)
	}
}

// TestBudgetCompileChildrenQueue: with room in the host's budget for one compile child at a
// time, two loads of different modules at once both succeed, one after the other: the
// budget's peak never holds two children, and nothing is reserved for children afterwards.
func TestBudgetCompileChildrenQueue(t *testing.T) {
	ctx := context.Background()
	const child = DefaultCompileMemoryBytes
	e := budgetChildEngine(t, 2*child, child)
	// Two children fill a budget of two exactly (a child's limit is clamped to half the
	// budget, and both fit an empty one); one byte held by something else leaves room for
	// one.
	if err := e.mem.reserve(ConsumerKernel, 1, "test"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			wasm := handleModule(nil, wasmtest.I32Const(int32(i)), wasmtest.I32Const(0), []byte{0x1a}) // distinct bytes
			_, errs[i] = e.Compile(ctx, fmt.Sprintf("m%d.wasm", i), wasm, ABIWqhostV1)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		t.Fatalf("two compiles still running after 5 minutes; host budget %+v", e.MemoryBudget())
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("compile %d: %v; want it queued, not refused", i, err)
		}
	}
	u := e.MemoryBudget()
	if u.ByConsumer["compile"] != 0 || u.Reserved != 1 {
		t.Fatalf("host budget after the compiles: %+v; want nothing reserved for children", u)
	}
	if u.Peak > child+1 {
		t.Fatalf("host budget peaked at %d bytes; want at most one child's %d and the byte held: the second compile should have waited", u.Peak, int64(child))
	}
	if u.Refused != 0 {
		t.Fatalf("%d refusals counted; a compile that waits is not refused", u.Refused)
	}
	t.Logf("budget compile: peak=%s MiB, one child=%s MiB", mib(u.Peak), mib(child))
	e.mem.release(ConsumerKernel, 1)
}

// TestBudgetModuleRefusalDoesNotFallBack: a fuel-instrumented module the tenant's budget
// refuses is refused, not loaded without its fuel counter because the smaller original
// bytes happen to fit (that fallback is for instrumented bytes wazero will not compile).
func TestBudgetModuleRefusalDoesNotFallBack(t *testing.T) {
	ctx := context.Background()
	e := budgetEngine(t, 0)
	m, err := e.Compile(ctx, "fuel.wasm", handleModule(nil, wasmtest.Loop, wasmtest.I32Const(0)), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	if m.c.fuel == nil || len(m.c.fuel.wasm) <= len(m.c.wasm) {
		t.Fatal("want a fuel-instrumented copy larger than the module")
	}
	// Compiled in process: the reservation is the bytes compiled.
	ten, err := e.Tenant("t", TenantLimits{MemoryBudgetBytes: int64(len(m.c.wasm))})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: time.Minute})
	if err == nil {
		_ = p.Close(ctx)
		t.Fatalf("NewPool in a budget the instrumented module does not fit: pool of variant %+v; want ErrMemoryBudget", p.v)
	}
	if !errors.Is(err, ErrMemoryBudget) || !strings.Contains(err.Error(), "module fuel.wasm") {
		t.Fatalf("NewPool: %v; want the budget's refusal of module fuel.wasm", err)
	}
	if got := reservedModules(ten); got != 0 {
		t.Fatalf("%d bytes reserved after the refusal; want 0", got)
	}
}

// wazeroCacheBytes is the size of wazero's files in a cache directory: its compiled code.
func wazeroCacheBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), "wqhost-") {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil || n == 0 {
		t.Fatalf("no compiled code in the cache directory %s (%v)", dir, err)
	}
	return n
}
