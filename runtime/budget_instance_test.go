package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/testcache"
	"github.com/wqhost/wqhost/internal/wasmtest"
)

// budgetEngine is testEngine with a host memory budget (0: unlimited).
func budgetEngine(t testing.TB, host int64) *Engine {
	t.Helper()
	e, err := NewEngine(context.Background(), EngineConfig{
		CacheDir: testcache.Dir(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MemoryBudgetBytes: host,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// growBy is a handler body that grows the memory by pages: with trap it traps (unreachable)
// when memory.grow returned -1, and otherwise returns 0; without, it returns 1 (retry) when
// memory.grow returned -1, 0 when it grew.
func growBy(pages int32, trap bool) []byte {
	b := concat(wasmtest.I32Const(pages), []byte{0x40, 0x00}, wasmtest.I32Const(-1), []byte{0x46}) // memory.grow; i32.eq -1
	if trap {
		b = concat(b, []byte{0x04, 0x40, 0x00, 0x0b}, wasmtest.I32Const(0)) // if unreachable end; 0
	}
	return b
}

// withMinPages replaces the one-page memory of a wasmtest module by one of pages.
func withMinPages(mod []byte, pages uint32) []byte {
	one := []byte{0x05, 0x03, 0x01, 0x00, 0x01} // memory section: one memory, min 1 page
	body := binary.AppendUvarint([]byte{0x01, 0x00}, uint64(pages))
	sec := append(binary.AppendUvarint([]byte{0x05}, uint64(len(body))), body...)
	if bytes.Count(mod, one) != 1 {
		panic("withMinPages: not a wasmtest module")
	}
	return bytes.Replace(mod, one, sec, 1)
}

// reservedInstances is what t's instance memories hold in its budget.
func reservedInstances(t *Tenant) int64 { return t.MemoryBudget().ByConsumer["instances"] }

// waitReleased waits until tenant's instance memories hold nothing in its budget, collecting
// so that memories released by a cleanup (settle) go too.
func waitReleased(t *testing.T, ten *Tenant, what string) {
	t.Helper()
	deadline := time.Now().Add(waitBudget)
	for reservedInstances(ten) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: tenant %s still holds %d bytes of instance memory %s later; want 0",
				what, ten.Name(), reservedInstances(ten), waitBudget)
		}
		goruntime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

// budgetTenant is a tenant with a memory budget (0: unlimited) and a 64 MiB memory limit,
// far enough above what its guests grow to that a trap is not taken for the memory limit
// (nearMemLimit).
func budgetTenant(t *testing.T, e *Engine, name string, budget int64) *Tenant {
	t.Helper()
	ten, err := e.Tenant(name, TenantLimits{MemoryPages: 1024, MemoryBudgetBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	return ten
}

// TestBudgetRefusesMemoryGrow: a handler growing its memory past its tenant's (or the
// host's) budget, though within its memory limit, sees memory.grow return -1; a call that
// then fails says which budget refused whom; a second tenant with room is unaffected; and
// nothing stays reserved once the pools close.
func TestBudgetRefusesMemoryGrow(t *testing.T) {
	const grow = 16 // pages: 1 MiB, far within the memory limit
	for _, tc := range []struct {
		name         string
		host, tenant int64
		trap         bool
		refuser      string
	}{
		{"guest sees -1", 0, 8 * PageBytes, false, "tenant small"},
		{"guest traps", 0, 8 * PageBytes, true, "tenant small"},
		{"host refuses", 8 * PageBytes, 0, true, "host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := budgetEngine(t, tc.host)
			m, err := e.Compile(ctx, "grow.wasm", handleModule(nil, growBy(grow, tc.trap)), ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			small := budgetTenant(t, e, "small", tc.tenant)
			p, err := small.NewPool(ctx, m, PoolConfig{Binding: "grower", Timeout: time.Minute, MaxInstances: 1})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Call(ctx, &Input{ID: "m1"})
			if !tc.trap {
				if err != nil || out.Verdict != VerdictRetry {
					t.Fatalf("call: status %v, err %v; want status 1: the guest saw memory.grow return -1", out, err)
				}
			} else {
				var be *BudgetError
				if !errors.As(err, &be) || !errors.Is(err, ErrMemoryBudget) {
					t.Fatalf("call: %v; want a *BudgetError (ErrMemoryBudget)", err)
				}
				if be.Budget != tc.refuser || be.Consumer != ConsumerInstances || be.Want != grow*PageBytes ||
					!strings.Contains(be.What, "binding grower") || !strings.Contains(be.What, "grow.wasm") {
					t.Fatalf("refusal %+v; want the %s budget refusing %d bytes of instance memory to binding grower (grow.wasm)",
						be, tc.refuser, grow*PageBytes)
				}
				t.Logf("refused: %v", err)
			}
			if s := small.MemoryBudget(); s.Refused != 1 {
				t.Fatalf("tenant small counted %d refusals; want 1", s.Refused)
			}

			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.host == 0 {
				// Another tenant on the engine, with room, runs the same module.
				roomy := budgetTenant(t, e, "roomy", 64*PageBytes)
				q, err := roomy.NewPool(ctx, m, PoolConfig{Binding: "grower", Timeout: time.Minute, MaxInstances: 1})
				if err != nil {
					t.Fatal(err)
				}
				if out, err := q.Call(ctx, &Input{ID: "m2"}); err != nil || out.Verdict != VerdictOK {
					t.Fatalf("tenant roomy: status %v, err %v; want ok: its budget has room", out, err)
				}
				if got := reservedInstances(roomy); got != (1+grow)*PageBytes {
					t.Fatalf("tenant roomy holds %d bytes of instance memory; want its warm instance's %d", got, (1+grow)*PageBytes)
				}
				if err := q.Close(ctx); err != nil {
					t.Fatal(err)
				}
				waitReleased(t, roomy, "pool closed")
			}
			waitReleased(t, small, "pool closed")
			if got := e.MemoryBudget().ByConsumer["instances"]; got != 0 {
				t.Fatalf("host holds %d bytes of instance memory after every pool closed; want 0", got)
			}
		})
	}
}

// TestBudgetRefusalExplainsOnlyItsCall: a refused memory.grow the guest coped with (it
// returned a status) does not make a later call's unrelated trap a budget refusal.
func TestBudgetRefusalExplainsOnlyItsCall(t *testing.T) {
	ctx := context.Background()
	e := budgetEngine(t, 0)
	// First call: byte 0 is 0; set it, grow 16 pages, return 1 when refused. Later calls:
	// byte 0 is 1; trap.
	body := concat(
		wasmtest.I32Const(0), []byte{0x2d, 0x00, 0x00, 0x04, 0x40, 0x00, 0x0b}, // i32.load8_u; if unreachable end
		wasmtest.I32Const(0), wasmtest.I32Const(1), []byte{0x3a, 0x00, 0x00}, // i32.store8
		growBy(16, false))
	m, err := e.Compile(ctx, "once.wasm", handleModule(nil, body), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	ten := budgetTenant(t, e, "small", 8*PageBytes)
	p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: time.Minute, MaxInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if out, err := p.Call(ctx, &Input{ID: "m1"}); err != nil || out.Verdict != VerdictRetry {
		t.Fatalf("first call: status %v, err %v; want status 1 (memory.grow refused, the guest coped)", out, err)
	}
	_, err = p.Call(ctx, &Input{ID: "m2"})
	if !errors.Is(err, ErrTrap) || errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("second call, an unreachable: %v; want a trap, not the first call's budget refusal", err)
	}
}

// TestBudgetInitialMemory: a module whose initial memory is more than its tenant's budget
// fails to instantiate with the budget's error, warming its pool or at a call, and keeps
// nothing reserved.
func TestBudgetInitialMemory(t *testing.T) {
	ctx := context.Background()
	e := budgetEngine(t, 0)
	m, err := e.Compile(ctx, "big.wasm", withMinPages(handleModule(nil, wasmtest.I32Const(0)), 32), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	for _, warm := range []int{1, 0} {
		ten := budgetTenant(t, e, "small", 16*PageBytes)
		p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: time.Minute, MinInstances: warm, MaxInstances: 1})
		if err == nil {
			_, err = p.Call(ctx, &Input{ID: "m"})
			_ = p.Close(ctx)
		}
		var be *BudgetError
		if !errors.As(err, &be) || be.Budget != "tenant small" || be.Want != 32*PageBytes {
			t.Fatalf("warm %d: %v; want the tenant's budget refusing the 32 initial pages", warm, err)
		}
		if warm == 0 && (p == nil || p.Stats().Instances != 0) {
			t.Fatalf("pool %v after a failed instantiation; want no instance", p)
		}
		waitReleased(t, ten, "failed instantiation")
		if u := ten.MemoryBudget(); u.Refused != 1 {
			t.Fatalf("warm %d: %d refusals counted; want 1", warm, u.Refused)
		}
		if err := ten.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBudgetStdioInstances: a wasi-stdio call's instance reserves its memory while it runs
// and gives it all back when the call returns; one that does not fit is refused.
func TestBudgetStdioInstances(t *testing.T) {
	ctx := context.Background()
	e := budgetEngine(t, 0)
	m := load(t, e, "testdata/stdio/stdio.wasm", ABIWasiStdio)
	ten, err := e.Tenant("acme", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "conv", OutputQueue: "out", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	for i, body := range []string{"x", "exit:75", "env"} {
		if _, err := p.Call(ctx, &Input{ID: "m", Body: []byte(body)}); err != nil {
			t.Fatalf("call %d (%s): %v", i, body, err)
		}
		if got := reservedInstances(ten); got != 0 {
			t.Fatalf("call %d (%s): %d bytes of instance memory reserved after it returned; want 0", i, body, got)
		}
	}
	u := ten.MemoryBudget()
	code := u.ByConsumer["modules"]
	if u.Peak <= code {
		t.Fatal("no instance memory reserved during three calls")
	}
	t.Logf("budget stdio: module reserved=%d KiB, instance memory peak=%d KiB", code>>10, (u.Peak-code)>>10)

	// A tenant whose budget holds the module but not one page more: the command's initial
	// memory does not fit.
	tiny, err := e.Tenant("tiny", TenantLimits{MemoryBudgetBytes: code + PageBytes})
	if err != nil {
		t.Fatal(err)
	}
	q, err := tiny.NewPool(ctx, m, PoolConfig{Binding: "conv", OutputQueue: "out", Timeout: time.Minute})
	if err != nil {
		t.Fatalf("a wasi-stdio pool warms no instance, so its budget can refuse only a call: %v", err)
	}
	defer q.Close(ctx)
	if _, err := q.Call(ctx, &Input{ID: "m", Body: []byte("x")}); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("call in a budget of the module and one page: %v; want ErrMemoryBudget", err)
	}
	if got := reservedInstances(tiny); got != 0 {
		t.Fatalf("%d bytes reserved after a refused call; want 0", got)
	}
}
