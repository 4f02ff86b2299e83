package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
)

// TenantLimits are the limits shared by every instance of one tenant.
type TenantLimits struct {
	// MemoryPages caps each instance's linear memory, in 64 KiB pages; 0 means DefaultMemoryPages (128 MiB).
	MemoryPages uint32
	// HTTPRequests caps the tenant's outbound HTTP requests open at once, across its
	// bindings; 0 means DefaultTenantHTTPRequests.
	HTTPRequests int
	// MemoryBudgetBytes is the tenant's memory budget (budget.go), reserved from the host's
	// too; 0: the host's budget alone bounds it.
	MemoryBudgetBytes int64
}

// MemoryBudget is the host's memory budget: limit, what is reserved, by consumer.
func (e *Engine) MemoryBudget() BudgetUsage { return e.mem.usage() }

// SetHostHeld makes n bytes the host's own share of its memory budget (ConsumerHost): what
// the host's Go heap holds outside every reservation, as the host measures it. Tenants'
// reservations are refused that much sooner; what they reserved already stays.
func (e *Engine) SetHostHeld(n int64) { e.mem.set(ConsumerHost, n) }

// MemoryBudget is the tenant's memory budget: limit, what is reserved, by consumer.
func (t *Tenant) MemoryBudget() BudgetUsage { return t.mem.usage() }

// ReserveMemory reserves n bytes for c from the tenant's memory budget (and the host's), or
// refuses with a *BudgetError naming what; ReleaseMemory gives them back. For what the
// caller holds on the tenant's behalf: a host reserves the bodies of the messages a call
// runs on (ConsumerMessages).
func (t *Tenant) ReserveMemory(c Consumer, n int64, what string) error {
	return t.mem.reserve(c, n, what)
}

// ReleaseMemory gives back n bytes of c that ReserveMemory reserved.
func (t *Tenant) ReleaseMemory(c Consumer, n int64) { t.mem.release(c, n) }

// SetMemoryBudget changes the tenant's memory budget to n bytes (0: unlimited, the host's
// alone bounds it), in place: what is reserved stays reserved, and new reservations see the
// new limit. A host sets it as tenants come and go, since a tenant's default is its share.
func (t *Tenant) SetMemoryBudget(n int64) { t.mem.setLimit(n) }

// Close closes the tenant's runtimes, releasing its compiled modules; its pools must be
// closed first. If it is still the engine's tenant of its name, the next Tenant call with
// that name creates a fresh one. Closing twice is harmless.
func (t *Tenant) Close(ctx context.Context) error {
	e := t.e
	e.mu.Lock()
	if e.tenants[t.name] == t {
		delete(e.tenants, t.name)
	}
	delete(e.open, t)
	e.mu.Unlock()
	return t.close(ctx)
}

// Tenant is one tenant's isolation domain: its own wazero runtimes, never shared.
type Tenant struct {
	name   string
	e      *Engine
	limits TenantLimits
	logger *slog.Logger
	// httpSem holds one token per open outbound request of any of the tenant's pools.
	httpSem chan struct{}
	// mem is the tenant's memory budget; its parent is the engine's.
	mem *memBudget

	mu sync.Mutex
	// rts holds two runtimes: [0] without and [1] with close-on-context-done, because that
	// option is per runtime and costs a goroutine per call and an exit to Go per loop
	// iteration, which pools without a time limit or with a fuel counter should not pay.
	rts      [2]wazero.Runtime
	compiled [2]map[string]*compiledRef
	// stuck counts guest code abandoned still running in the runtimes (bounded.go): they
	// stay open while any does.
	stuck atomic.Int64
	// late counts pools closed with calls still in flight (Pool.Close) whose calls have not
	// all returned: the runtimes stay open while any has, as for stuck.
	late atomic.Int64
}

// variant is how a pool's module is compiled: terminate runs it in the close-on-context-done
// runtime, fuel compiles the fuel-instrumented bytes.
type variant struct{ terminate, fuel bool }

func (v variant) key(m *Module) (int, string) {
	i, key := 0, m.c.digest
	if v.terminate {
		i = 1
	}
	if v.fuel {
		key += "+fuel"
	}
	return i, key
}

// compiledRef is a module compiled in one of the tenant's runtimes, shared by every pool of
// that version. The last pool to close releases it: hot reloads would otherwise keep every
// version's machine code for the life of the host.
type compiledRef struct {
	flight[wazero.CompiledModule]
	refs int
	// held is what it reserved from the tenant's memory budget (ConsumerModules).
	held int64
}

// Limits returns the limits the tenant was created with.
func (t *Tenant) Limits() TenantLimits { return t.limits }

// Name is the tenant's name.
func (t *Tenant) Name() string { return t.name }

func (t *Tenant) runtime(ctx context.Context, terminate bool) (wazero.Runtime, int, error) {
	i := 0
	if terminate {
		i = 1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rts[i] != nil {
		return t.rts[i], i, nil
	}
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(t.e.cache).
		// The wasm32 maximum, not the tenant's limit: the pool's memory allocator enforces
		// that and records each refusal (instanceMemory); compile refuses a module
		// declaring more than the limit as wazero did.
		WithMemoryLimitPages(wasmMaxPages).
		WithCloseOnContextDone(terminate)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if err := instantiateWASI(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, 0, fmt.Errorf("runtime: tenant %s: wasi: %w", t.name, err)
	}
	if _, err := hostModule(rt).Instantiate(ctx); err != nil {
		_ = rt.Close(ctx)
		return nil, 0, fmt.Errorf("runtime: tenant %s: host module: %w", t.name, err)
	}
	if _, err := extismModule(rt).Instantiate(ctx); err != nil {
		_ = rt.Close(ctx)
		return nil, 0, fmt.Errorf("runtime: tenant %s: %s host module: %w", t.name, extismModuleName, err)
	}
	t.rts[i] = rt
	t.compiled[i] = map[string]*compiledRef{}
	return rt, i, nil
}

// compile returns the module compiled in the tenant's runtime, once per digest.
func (t *Tenant) compile(ctx context.Context, m *Module, v variant) (wazero.Runtime, wazero.CompiledModule, error) {
	rt, i, err := t.runtime(ctx, v.terminate)
	if err != nil {
		return nil, nil, err
	}
	_, key := v.key(m)
	t.mu.Lock()
	f, ok := t.compiled[i][key]
	if !ok {
		f = &compiledRef{flight: flight[wazero.CompiledModule]{done: make(chan struct{})}}
		t.compiled[i][key] = f
	}
	f.refs++
	t.mu.Unlock()
	if !ok {
		wasm := m.c.wasm
		if v.fuel {
			wasm = m.c.fuel.wasm
		}
		// What the load costs the host, reserved before it is paid (loadcost.go): the
		// machine code and decoded module the child measured, and the bytes kept.
		f.held = m.c.loadBytes + int64(len(wasm))
		f.err = t.mem.reserve(ConsumerModules, f.held, "module "+m.name)
		if f.err == nil {
			unlock := t.e.compiling.lock(key)
			f.val, f.err = compileModule(ctx, rt, wasm)
			unlock()
			if f.err == nil {
				if f.err = t.checkDeclaredMemory(f.val); f.err != nil {
					_ = f.val.Close(ctx)
					f.val = nil
				}
			}
			if f.err != nil {
				t.mem.release(ConsumerModules, f.held)
			}
		}
		if f.err != nil {
			f.held = 0
			f.err = fmt.Errorf("runtime: tenant %s: compile %s: %w", t.name, m.name, f.err)
		}
		close(f.done)
	} else {
		<-f.done
	}
	if f.err != nil {
		t.release(ctx, m, v)
		return nil, nil, f.err
	}
	return rt, f.val, nil
}

// release drops one pool's hold on its compiled module, closing it after the last.
func (t *Tenant) release(ctx context.Context, m *Module, v variant) {
	i, key := v.key(m)
	t.mu.Lock()
	f, ok := t.compiled[i][key]
	if !ok {
		t.mu.Unlock()
		return
	}
	f.refs--
	if f.refs > 0 {
		t.mu.Unlock()
		return
	}
	delete(t.compiled[i], key)
	t.mu.Unlock()
	<-f.done
	if f.val != nil {
		_ = f.val.Close(ctx)
		t.mem.release(ConsumerModules, f.held)
		// wazero unmaps machine code in a finalizer, and a host whose guests live outside
		// the Go heap collects rarely: without a collection a reload round's old versions
		// stayed resident, round after round.
		t.e.collect()
	}
}

func (t *Tenant) close(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.stuck.Load(); n > 0 {
		return fmt.Errorf("runtime: tenant %s: %d start functions or self tests abandoned still running; its runtime stays open", t.name, n)
	}
	if n := t.late.Load(); n > 0 {
		// Closing a runtime closes its modules, memories included, under the calls still
		// running on them.
		return fmt.Errorf("runtime: tenant %s: calls of %d closed pools still running; its runtime stays open", t.name, n)
	}
	var errs []error
	for i, rt := range t.rts {
		if rt != nil {
			// Closing the runtime closes what pools still hold: their reservations go too.
			for _, f := range t.compiled[i] {
				select {
				case <-f.done:
					t.mem.release(ConsumerModules, f.held)
					f.held = 0
				default:
				}
			}
			errs = append(errs, rt.Close(ctx))
			t.rts[i] = nil
			t.compiled[i] = nil
		}
	}
	return errors.Join(errs...)
}
