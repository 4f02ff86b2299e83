// Package runtime runs WebAssembly handlers under wazero: one runtime per tenant sharing an
// on-disk compilation cache, modules compiled once per sha256 digest, pools of warm instances
// with memory and time limits, and the guest ABIs of docs/abi.md (wqhost/v1, wasi-stdio and
// extism, Extism plugins run unchanged: extism*.go).
package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/tetratelabs/wazero"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// ABI names the contract between host and guest (docs/abi.md).
type ABI string

// The ABIs the host supports.
const (
	ABIWqhostV1  ABI = "wqhost/v1"
	ABIWasiStdio ABI = "wasi-stdio"
)

// EngineConfig configures an Engine.
type EngineConfig struct {
	// CacheDir holds compiled machine code across restarts; empty keeps it in memory only.
	CacheDir string
	// Logger receives guest logs and runtime events; nil uses slog.Default().
	Logger *slog.Logger
	// CompileLimits are the structural caps Compile applies (shape.go); zero fields take
	// the defaults. CompileWithLimits applies others, a tenant's.
	CompileLimits CompileLimits
	// CompileInChild compiles each new module version in a child process, a re-execution
	// of this binary (which must call RunCompileChild first in main), bounded by
	// CompileTimeout and CompileMemoryBytes, into CacheDir (compilechild.go). Without a
	// CacheDir it does nothing.
	CompileInChild bool
	// CompileTimeout bounds one module's compile in a child unless its CompileLimits set
	// one (0: DefaultCompileTimeout).
	CompileTimeout time.Duration
	// CompileMemoryBytes is a child's resident memory unless its CompileLimits set one
	// (0: DefaultCompileMemoryBytes).
	CompileMemoryBytes uint64
	// MemoryBudgetBytes is the host's memory budget (budget.go): what every tenant's
	// instance memories, kernel memory, compiled modules and the compile children together
	// may reserve; 0: unlimited. A compile child's memory limit is at most half of it.
	MemoryBudgetBytes int64
}

// Engine owns the compilation cache, the validated modules and the tenants' runtimes.
type Engine struct {
	cache    wazero.CompilationCache
	cacheDir string    // also keeps instrumented modules; empty: instrumented on every load
	epoch    time.Time // the origin of since, read with its monotonic clock
	idle     janitor   // reaps idle instances (idle.go)
	logger   *slog.Logger
	check    *checker
	// httpTr carries every pool's outbound requests: one connection pool for the host,
	// capped host-wide; each request brings its own policy (http.go).
	httpTr *http.Transport
	limits CompileLimits
	budget compileBudget
	// childless is set once a child answered that this binary runs none (RunCompileChild).
	childless atomic.Bool
	// compiling serialises the tenants' compiles of one version (compilelock.go).
	compiling compileLocks
	// memories counts the pooled instances' mapped linear memories (guestmem.go).
	memories *guestMemories
	// mem is the host's memory budget, every tenant's budget's parent (budget.go).
	mem *memBudget
	// children holds one token per compile child running: at most GOMAXPROCS at once.
	children chan struct{}
	// collecting: a collection is scheduled (collect).
	collecting atomic.Bool

	mu      sync.Mutex
	modules map[string]*moduleFlight
	tenants map[string]*Tenant // the current tenant of each name
	open    map[*Tenant]bool   // every tenant not yet closed, replaced ones included
	closed  bool
}

// flight is a single-flight slot: the first caller fills it, the rest wait on done.
type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
}

// compiled is what every Module with the same bytes and ABI shares.
type compiled struct {
	digest   string
	abi      ABI
	wasm     []byte
	selfTest bool
	usesHTTP bool // declares or imports outbound HTTP
	batch    bool // exports wqhost_handle_batch () -> i32 (batch.go)
	// functions are an Extism plugin's exports a binding's function: may name (extism_call.go).
	functions []string
	// fuel is the module instrumented with a fuel counter (yield.go); nil when the
	// instrumenter could not read it, and the time limit uses close-on-context-done.
	fuel *yieldCode
	// loadBytes is what a compile child measured one load of it into a runtime costs
	// (loadcost.go); 0: not measured (compiled in process).
	loadBytes int64
	// instanceHeap is what an instance holds on the heap beyond its linear memory (tables,
	// globals: moduleShape.instanceHeapBytes).
	instanceHeap int64
}

// Module is a validated module, ready to be instantiated by any tenant.
type Module struct {
	name string
	c    *compiled
}

// Name is the name the module was loaded under (usually its file path).
func (m *Module) Name() string { return m.name }

// Digest is the hex sha256 of the module's bytes.
func (m *Module) Digest() string { return m.c.digest }

// ABI is the module's declared ABI.
func (m *Module) ABI() ABI { return m.c.abi }

// NewEngine creates an Engine. Close it to release the cache and every tenant's runtime.
func NewEngine(ctx context.Context, cfg EngineConfig) (*Engine, error) {
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("runtime: compilation cache %s: %w", cfg.CacheDir, err)
		}
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("runtime: compilation cache %s: %w", cfg.CacheDir, err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	chk, err := newChecker(ctx)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cache: cache, cacheDir: cfg.CacheDir, epoch: time.Now(), logger: logger, check: chk,
		httpTr:   newHTTPTransport(),
		limits:   cfg.CompileLimits,
		budget:   compileBudget{child: cfg.CompileInChild, timeout: cfg.CompileTimeout, memory: cfg.CompileMemoryBytes},
		memories: newGuestMemories(),
		mem:      newMemBudget("host", cfg.MemoryBudgetBytes, nil),
		children: make(chan struct{}, max(1, goruntime.GOMAXPROCS(0))),
		modules:  map[string]*moduleFlight{},
		tenants:  map[string]*Tenant{},
		open:     map[*Tenant]bool{},
	}
	if e.budget.timeout <= 0 {
		e.budget.timeout = DefaultCompileTimeout
	}
	if e.budget.memory == 0 {
		e.budget.memory = DefaultCompileMemoryBytes
	}
	e.idle.pools, e.idle.stop = map[*Pool]struct{}{}, make(chan struct{})
	return e, nil
}

// Compile validates wasm against abi and returns the module. Loads of the same bytes and ABI,
// concurrent or not, validate and compile once. The module must fit the engine's
// CompileLimits.
func (e *Engine) Compile(ctx context.Context, name string, wasm []byte, abi ABI) (*Module, error) {
	return e.CompileWithLimits(ctx, name, wasm, abi, e.limits)
}

// CompileWithLimits is Compile with the structural caps limits (zero fields: the defaults)
// instead of the engine's. A module that breaks one fails with a *CapError (ErrCompileLimit)
// before wazero reads it; a wazero panic on it fails with ErrCompilerPanic; a compile in a
// child (CompileInChild) past its budget with ErrCompileBudget. Concurrent loads of the same
// bytes share one compile, under the first one's limits.
func (e *Engine) CompileWithLimits(ctx context.Context, name string, wasm []byte, abi ABI, limits CompileLimits) (*Module, error) {
	if abi == "" {
		abi = ABIWqhostV1
	}
	// Per call, not per digest: tenants differ in their caps, and the pass costs less than
	// hashing the bytes below.
	shape, err := shapeNamed(name, wasm, limits)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	digest := hex.EncodeToString(sum[:])
	key := digest + "|" + string(abi)
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, fmt.Errorf("runtime: compile %s: engine closed", name)
		}
		f, ok := e.modules[key]
		if !ok {
			f = &moduleFlight{done: make(chan struct{})}
			e.modules[key] = f
			e.mu.Unlock()
			c, err := e.load(ctx, name, wasm, digest, abi, limits)
			if c != nil {
				c.instanceHeap = shape.instanceHeapBytes()
				f.val = weak.Make(c)
				goruntime.AddCleanup(c, e.forget, moduleKey{key, f})
			}
			f.err = err
			close(f.done)
			if err != nil {
				// A failed validation is not cached: the next load of a fixed file must retry.
				e.forget(moduleKey{key, f})
				return nil, err
			}
			return &Module{name: name, c: c}, nil
		}
		e.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("runtime: compile %s: %w", name, ctx.Err())
		}
		if f.err != nil {
			return nil, f.err
		}
		if c := f.val.Value(); c != nil {
			return &Module{name: name, c: c}, nil
		}
		// The last Module of that version was dropped since: validate it again.
		e.forget(moduleKey{key, f})
	}
}

// load validates a module version against abi and instruments it: in a child process within
// budget (CompileInChild), or in process.
func (e *Engine) load(ctx context.Context, name string, wasm []byte, digest string, abi ABI, limits CompileLimits) (*compiled, error) {
	if e.useChild() {
		c, err := e.validateInChild(ctx, name, wasm, digest, abi, limits)
		if !errors.Is(err, errNoChild) {
			return c, err
		}
		if !e.childless.Swap(true) {
			e.logger.Warn("compiling in process, without a time or memory budget", "err", err)
		}
	}
	c, err := e.check.validate(ctx, name, wasm, abi)
	if err != nil {
		return nil, err
	}
	c.digest = digest
	c.fuel = e.instrument(name, c)
	return c, nil
}

// moduleFlight is one module version: validated once by the first Compile of its bytes,
// then remembered weakly, so that a version no Module refers to any more (a binding's
// previous version after a hot reload) is freed with its bytes and instrumented copy
// instead of staying for the life of the engine.
type moduleFlight struct {
	done chan struct{}
	val  weak.Pointer[compiled]
	err  error
}

type moduleKey struct {
	key string
	f   *moduleFlight
}

// forget drops a module version's entry, unless a newer one has taken its key.
func (e *Engine) forget(k moduleKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.modules[k.key] == k.f {
		delete(e.modules, k.key)
	}
}

// instrument adds the fuel counter to a wqhost/v1 or Extism module. A module it cannot read keeps the
// slower close-on-context-done time limit, said once per module version. With a cache
// directory the result is kept there, so a restart (or another engine on the same
// directory) does not decode a large module again. What the cache holds is checked before
// it runs (sealFuel): a truncated file, or another module's instrumented copy moved to this
// name, is instrumented again and overwritten, never run.
func (e *Engine) instrument(name string, c *compiled) *yieldCode {
	if c.abi != ABIWqhostV1 && c.abi != ABIExtism {
		// wasi-stdio instantiates a module per message: the watchdog's share is small there.
		return nil
	}
	var cached string
	if e.cacheDir != "" {
		cached = filepath.Join(e.cacheDir, fmt.Sprintf("wqhost-fuel-v%d-%s.wasm", fuel.Version, c.digest))
		if b, err := os.ReadFile(cached); err == nil {
			if wasm, ok := unsealFuel(c.digest, b); ok {
				return &yieldCode{wasm: wasm}
			}
			e.logger.Warn("instrumented module in the cache does not match its seal; instrumenting again",
				"module", name, "file", cached)
		}
	}
	yc, err := instrumentRecovered(c.wasm)
	if err != nil {
		e.logger.Warn("time limit falls back to wazero's close-on-context-done (slower loops and calls)",
			"module", name, "digest", c.digest[:12], "err", err)
		return nil
	}
	if cached != "" {
		if err := writeAtomic(cached, sealFuel(c.digest, yc.wasm)); err != nil {
			e.logger.Warn("instrumented module not cached", "module", name, "err", err)
		}
	}
	return yc
}

// collect runs a collection and returns freed memory to the kernel soon, once for however
// many modules were released meanwhile.
func (e *Engine) collect() {
	if e.collecting.Swap(true) {
		return
	}
	time.AfterFunc(100*time.Millisecond, func() {
		e.collecting.Store(false)
		debug.FreeOSMemory()
	})
}

// since is the engine's clock: monotonic time since it started, as cheap as a clock read
// gets (time.Since of a time with a monotonic reading reads only the monotonic clock).
func (e *Engine) since() time.Duration { return time.Since(e.epoch) }

// writeAtomic writes b to path through a temporary file renamed into place, so a reader
// (another engine sharing the directory, or the next start after a crash) sees all of it or
// nothing.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// Tenant returns the tenant's runtime, creating it on first use. Later calls return the same
// Tenant and ignore limits.
func (e *Engine) Tenant(name string, limits TenantLimits) (*Tenant, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("runtime: tenant %s: engine closed", name)
	}
	if t, ok := e.tenants[name]; ok {
		return t, nil
	}
	return e.newTenantLocked(name, limits), nil
}

// ReplaceTenant creates a fresh runtime for the tenant with new limits and makes it the one
// Tenant returns from now on. The tenant it replaces keeps serving its pools until its
// Close: a reload builds the new version of a tenant before it stops the old one.
func (e *Engine) ReplaceTenant(name string, limits TenantLimits) (*Tenant, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, fmt.Errorf("runtime: tenant %s: engine closed", name)
	}
	return e.newTenantLocked(name, limits), nil
}

func (e *Engine) newTenantLocked(name string, limits TenantLimits) *Tenant {
	if limits.MemoryPages == 0 {
		limits.MemoryPages = DefaultMemoryPages
	}
	slots := limits.HTTPRequests
	if slots <= 0 {
		slots = DefaultTenantHTTPRequests
	}
	t := &Tenant{name: name, e: e, limits: limits, logger: e.logger.With("tenant", name), httpSem: make(chan struct{}, slots),
		mem: newMemBudget("tenant "+name, limits.MemoryBudgetBytes, e.mem)}
	e.tenants[name] = t
	e.open[t] = true
	return t
}

// Close closes every tenant's runtime and the cache. Pools should be closed first.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	wasClosed := e.closed
	e.closed = true
	open := e.open
	e.tenants, e.open = map[string]*Tenant{}, map[*Tenant]bool{}
	e.mu.Unlock()
	if !wasClosed {
		e.idle.close()
	}
	e.httpTr.CloseIdleConnections()
	var errs []error
	for t := range open {
		errs = append(errs, t.close(ctx))
	}
	errs = append(errs, e.check.rt.Close(ctx), e.cache.Close(ctx))
	return errors.Join(errs...)
}
