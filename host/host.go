// Package host wires a validated config into running bindings: for each tenant's binding a
// queue backend, a listener (listener/), a pool of warm WebAssembly instances (runtime/) and
// its policies (plugins/builtin, or external plugins), plus the admin HTTP API
// (host/admin) and Prometheus metrics.
//
// A handler's verdict maps onto the listener: ok sends every output to the binding's output
// queue (the tenant's own queues only; sends finish before the message is deleted), retry is
// a delayed release, reject dead-letters the message with the guest's error text, and a
// failed call (trap, timeout, memory limit) is an ordinary failure the poison policy settles.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wqhost/wqhost/host/admin"
	"github.com/wqhost/wqhost/host/admin/console"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/internal/backends"
	"github.com/wqhost/wqhost/host/internal/breaker"
	"github.com/wqhost/wqhost/host/internal/fair"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/internal/clock"
	"github.com/wqhost/wqhost/runtime"
)

// ErrAdminListen reports that New could not listen on admin.addr (the port is taken): a
// failure to run, not a problem of the config.
var ErrAdminListen = errors.New("cannot listen")

// ErrNotFound reports a tenant or queue the host does not serve.
var ErrNotFound = errors.New("not found")

// ErrInvalidQueue reports a queue name that no tenant can own. It wraps
// runtime.ErrInvalidName, so a guest's emit of such a name gets ERR_INVALID.
var ErrInvalidQueue = backends.ErrInvalidQueue

// ErrReservedQueue reports a well-formed queue name no tenant may write to: a "-poison"
// queue, which only the host's dead-lettering fills. A guest's emit gets ERR_DENIED.
var ErrReservedQueue = config.ErrReservedQueue

// Host runs every binding of a config. Create it with New, then call Run once.
type Host struct {
	// Set by New and read-only after; each part locks itself (host/internal/...).

	// cfg is the config as loaded. A config reload changes tenants and the host-wide
	// max_concurrency only (see live); the settings read from cfg need a restart.
	cfg     *config.Config
	log     *slog.Logger
	engine  *runtime.Engine
	backs   *backends.Set // the backends, each opened once (host/internal/backends)
	idle    idleBudgets   // azure backends' idle polling budgets (idlebudget.go)
	metrics *metrics
	started time.Time
	// sched holds the share of every tenant with a limiter; its total is the host-wide
	// max_concurrency shared by weight (host/internal/fair), 0 for none.
	sched *fair.Scheduler
	// suspect are the slots of calls of bindings whose circuit breaker is not closed
	// (host/internal/breaker).
	suspect chan struct{}
	// debounce is how long the watcher waits after the last event on a file before reading
	// it: editors and copies write in several steps (truncate, writes, rename).
	debounce time.Duration
	// rtClosed, if set, is called after a reload closed a runtime tenant (a test hook).
	rtClosed func(*runtime.Tenant)
	hooks    startHooks
	// startTotal is the bindings New builds, set before the admin API serves.
	startTotal int
	// mem is the host's memory budget and the limit it came from (memory.go).
	mem memoryBudget

	// Replaced or flipped whole, without a lock.

	// live is the config in force: cfg, or the last config reload applied.
	live atomic.Pointer[config.Config]
	// tokens are the admin API's bearer tokens in force; a config reload replaces them.
	tokens atomic.Pointer[admin.Tokens]
	ready  atomic.Bool
	// starting is true while New builds the bindings: startUp of startTotal are built (the
	// progress /readyz and /v1/status report).
	starting atomic.Bool
	startUp  atomic.Int64
	// waiting holds, while New waits for a backend that cannot serve yet, each waiting
	// binding's key (tenants.<t>.bindings.<b>) and the reason (waitbackend.go).
	waiting   sync.Map
	runOnce   atomic.Bool
	closeOnce sync.Once
	closeErr  error // set inside closeOnce
	// jobs run the admin API's dead-letter redrives; Close stops them (adminqueues.go).
	jobs jobRunner

	// The host's locks, each guarding its own part. Lock order: reloadMu first; it is the
	// only one of them held while another is taken (a reload reads and changes the serving
	// set, starts and stops listeners, opens backends, registers scheduler shares, swaps
	// module versions). servingMu, run.mu and adminMu are leaves: none is held while another
	// lock is taken. Below them, a binding's module reload takes the binding's reloadMu, then
	// its mu or its breaker's; those, outMu, configErr's, backs' and the scheduler's never
	// take one of the host's.

	// reloadMu serialises reloads (file watcher, SIGHUP, admin API) and Close; waiting for
	// it gives up when the waiter's context ends (shutdown.go).
	reloadMu   reloadLock
	loadConfig func() (*config.Config, error) // under reloadMu; see SetConfigLoader
	// closed is set by Close, under reloadMu unless a reload in progress outlasted
	// ShutdownSlack; a reload checks it under reloadMu.
	closed atomic.Bool
	// pinned holds the runtime tenants of bindings a reload failed to stop (or close): their
	// pools may still be live, and closing a runtime under live pools breaks their calls, so
	// a reload never closes these; the engine does when the host stops. Under reloadMu.
	pinned    map[*runtime.Tenant]bool
	configErr lastError                     // the last failed config reload, cleared by one that succeeds
	logLevel  atomic.Pointer[slog.LevelVar] // the logger's level, set by a reload (SetLogLevel)

	// tenants and binds are the tenants and bindings serving now (serving.go): New fills
	// them, config reloads change them; read them through tenantNamed, tenantList and
	// bindings. Under servingMu.
	servingMu sync.RWMutex
	tenants   map[string]*tenant
	binds     []*binding // sorted by tenant, then name

	// run is the state of Run that config reloads need to start and stop bindings (run.go,
	// under run.mu).
	run runner

	// The admin server starts in New (start.go), so it answers while bindings are built;
	// Run or Close stops it. Under adminMu.
	adminMu   sync.Mutex
	adminAddr net.Addr
	srv       *http.Server
	srvErr    chan error // receives Serve's error
}

type tenant struct {
	name string
	// rt is shared with the tenant this one rebuilt unless its memory limit changed: a
	// runtime's limit is fixed when the engine creates it.
	rt      *runtime.Tenant
	limiter *fair.Share // the tenant cap and its share of the budget; nil: neither
	// cfg is the tenant's config in force. Only the settings a config reload applies live
	// (weight, max_concurrency, token_env) may differ from those its bindings were built
	// with: a change to any other one rebuilds the tenant.
	cfg atomic.Pointer[config.Tenant]
	// usage sums its bindings' handler calls (meter.go): shared with the tenant this one
	// rebuilt, so a config reload does not reset the tenant's counters.
	usage *usageCounters
	// quota is its fuel quota's state (quota.go); nil without limits.fuel_quota. Kept
	// across rebuilds like usage.
	quota *fuelQuota
}

// conf returns the tenant's config in force.
func (t *tenant) conf() *config.Tenant { return t.cfg.Load() }

// needsLimiter reports whether a tenant's calls go through the fair scheduler: only when
// there is a cap to keep, its own or the host's, so that uncapped hosts pay nothing per call.
func needsLimiter(tc config.Tenant, hostBudget int) bool {
	return tc.MaxConcurrency > 0 || hostBudget > 0
}

// runtimeLimits are the limits a tenant's runtime is created with.
func runtimeLimits(tc config.Tenant) runtime.TenantLimits {
	// Pages rounded up, so a limit is never below the configured bytes.
	return runtime.TenantLimits{MemoryPages: uint32((int64(tc.Limits.Memory) + 65535) / 65536), HTTPRequests: tc.Limits.HTTPConcurrency}
}

// newTenant builds a tenant and its share of the fair scheduler, not yet registered: the
// caller adds it once the tenant's bindings are built. It runs on rt, a runtime tenant kept
// from the tenant it rebuilds, or, when rt is nil, on a fresh one with the tenant's limits.
func (h *Host) newTenant(name string, tc config.Tenant, hostBudget int, memBudget int64, rt *runtime.Tenant) (*tenant, error) {
	t := &tenant{name: name, usage: &usageCounters{}, quota: newFuelQuota(clock.Real{}, tc.Limits.FuelQuota)}
	t.cfg.Store(&tc)
	if rt == nil {
		// ReplaceTenant, not Tenant: the engine may still hold a runtime under this name, of
		// a removed tenant whose bindings failed to stop. Reusing it would keep its memory
		// limit and could close it later under that binding's live pools.
		var err error
		if rt, err = h.engine.ReplaceTenant(name, runtimeLimits(tc)); err != nil {
			return nil, fmt.Errorf("tenants.%s: %w", name, err)
		}
	}
	if needsLimiter(tc, hostBudget) {
		t.limiter = h.sched.NewShare(name, tc.Weight, tc.MaxConcurrency)
	}
	rt.SetMemoryBudget(memBudget)
	t.rt = rt
	return t, nil
}

// ErrDuplicateToken is a config in which two admin tokens (the host's and a tenant's, or two
// tenants') have the same value: the admin API could not tell who is calling.
var ErrDuplicateToken = errors.New("admin tokens must be distinct")

// tokensFor reads the admin tokens a config names from the environment; an empty or unset
// variable is an error naming its key, and so is a value another key already has
// (ErrDuplicateToken, naming both keys, never the value).
func tokensFor(cfg *config.Config) (admin.Tokens, []error) {
	var errs []error
	owner := map[string]string{} // token value -> the first key holding it
	read := func(key, env string) string {
		if env == "" {
			return ""
		}
		v := os.Getenv(env)
		if v == "" {
			errs = append(errs, fmt.Errorf("%s: environment variable %s is empty or unset", key, env))
			return ""
		}
		if first, ok := owner[v]; ok {
			errs = append(errs, fmt.Errorf("%s: the token in %s equals the one %s names: %w", key, env, first, ErrDuplicateToken))
			return ""
		}
		owner[v] = key
		return v
	}
	tok := admin.Tokens{Host: read("admin.token_env", cfg.Admin.TokenEnv), Tenants: map[string]string{}}
	for _, tn := range slices.Sorted(maps.Keys(cfg.Tenants)) {
		if v := read("tenants."+tn+".token_env", cfg.Tenants[tn].TokenEnv); v != "" {
			tok.Tenants[tn] = v
		}
	}
	return tok, errs
}

// New builds every binding of cfg: opens the backends and queues, compiles and validates
// each module, warms its pool and starts its plugins, several bindings at once
// (startParallelism). Nothing processes messages until Run, but the admin API serves from
// here on: /readyz answers 503 with the bindings up so far until every one is built.
// If anything fails, everything already built is closed and the error (one per failing
// binding, joined, in config order) is returned: a host never starts half-configured.
func New(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*Host, error) {
	return newWithHooks(ctx, cfg, logger, startHooks{})
}

// newWithHooks is New with hooks into the start (tests).
func newWithHooks(ctx context.Context, cfg *config.Config, logger *slog.Logger, hooks startHooks) (*Host, error) {
	if cfg == nil {
		return nil, errors.New("host: nil config")
	}
	if logger == nil {
		logger = slog.Default()
	}
	// A config from config.Parse without checks (a library user's) gets the module and
	// plugin file checks here, each problem naming its key, as source.LoadConfig's does.
	if errs := source.Check(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("host: %w", &config.Error{Problems: errs})
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("host: data_dir %s: %w", cfg.DataDir, err)
	}
	// The admin port is taken first: a second host on a busy port fails here, before it
	// builds anything or logs "host ready".
	var adminLn net.Listener
	if cfg.Admin.Addr != "off" {
		ln, err := net.Listen("tcp", cfg.Admin.Addr)
		if err != nil {
			return nil, fmt.Errorf("host: admin.addr %s: %w: %w", cfg.Admin.Addr, ErrAdminListen, err)
		}
		adminLn = ln
	}
	mem := hostMemory(cfg)
	engine, err := runtime.NewEngine(ctx, runtime.EngineConfig{CacheDir: cfg.CacheDir(), Logger: logger, CompileInChild: true,
		MemoryBudgetBytes: mem.budget})
	if err != nil {
		if adminLn != nil {
			_ = adminLn.Close()
		}
		return nil, fmt.Errorf("host: %w", err)
	}
	h := &Host{
		cfg: cfg, log: logger, engine: engine, mem: mem,
		backs:    backends.NewSet(cfg, logger),
		tenants:  map[string]*tenant{},
		started:  time.Now(),
		debounce: defaultDebounce,
		sched:    fair.New(cfg.MaxConcurrency),
		suspect:  breaker.NewSuspectSlots(),
		jobs:     newJobs(),
		pinned:   map[*runtime.Tenant]bool{},
		hooks:    hooks,
		reloadMu: newReloadLock(),
	}
	h.configErr.okAt = h.started // the config New loaded is the first good one
	h.live.Store(cfg)
	h.metrics = newMetrics(h)
	tokens, errs := tokensFor(cfg)
	h.tokens.Store(&tokens)
	var jobs []bindingJob
	for _, tn := range slices.Sorted(maps.Keys(cfg.Tenants)) {
		tc := cfg.Tenants[tn]
		t, err := h.newTenant(tn, tc, cfg.MaxConcurrency, cfg.TenantMemoryBudget(tn, h.mem.budget), nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if t.limiter != nil {
			h.sched.Add(t.limiter)
		}
		h.setTenant(tn, t)
		for _, bn := range slices.Sorted(maps.Keys(tc.Bindings)) {
			jobs = append(jobs, bindingJob{t: t, name: bn, cfg: tc.Bindings[bn]})
		}
	}
	h.startTotal = len(jobs)
	h.starting.Store(true)
	if adminLn != nil && len(errs) == 0 {
		if err := h.serveAdmin(adminLn); err != nil {
			errs = append(errs, err)
		} else if hooks.served != nil {
			hooks.served(h.AdminAddr())
		}
		adminLn = nil // serving, or closed by serveAdmin
	}
	// Every binding is built even after an error above, so one start reports all of them.
	begin, par := time.Now(), startParallelism()
	binds, berrs := h.buildBindings(ctx, jobs, par)
	h.setBindings(binds)
	errs = append(errs, berrs...)
	h.log.Debug("bindings built", "bindings", len(binds), "parallelism", par, "took", time.Since(begin))
	h.starting.Store(false)
	if len(errs) > 0 {
		if adminLn != nil {
			_ = adminLn.Close()
		}
		_ = h.Close(context.Background())
		return nil, fmt.Errorf("host: %w", errors.Join(errs...))
	}
	h.ready.Store(true)
	h.logIdleBudgets()
	h.log.Info("host ready", "tenants", len(h.tenantList()), "bindings", len(h.binds), "data_dir", cfg.DataDir,
		"memory_budget", config.ByteSize(h.mem.budget), "memory_limit", config.ByteSize(h.mem.limit), "memory_limit_source", h.mem.source)
	return h, nil
}

// Config returns the config the host runs (the last one a config reload applied).
func (h *Host) Config() *config.Config { return h.live.Load() }

// Ready reports whether every binding's module is loaded and the host is not shutting down.
func (h *Host) Ready() bool { return h.ready.Load() }

// AdminAddr returns the admin server's bound address (it serves from New on), or nil
// when admin.addr is "off".
func (h *Host) AdminAddr() net.Addr {
	h.adminMu.Lock()
	defer h.adminMu.Unlock()
	return h.adminAddr
}

// Run processes messages on every binding, with the admin API New started (unless
// admin.addr is "off"), until ctx is done. Then it shuts down gracefully: listeners stop
// receiving, handlers in flight finish (within the listener's grace period), leased messages
// that did not start are released at once, and everything is closed. Handlers that do not
// return after the grace are abandoned (shutdown.go): Run returns ErrAbandoned within
// ShutdownBound(cfg) whatever the guests do. For local backends it
// also watches the store for messages committed by other processes (`wqhost send`) so they
// are picked up at once. Run returns nil after a clean shutdown; it may be called once.
func (h *Host) Run(ctx context.Context) error {
	if !h.runOnce.CompareAndSwap(false, true) {
		return errors.New("host: Run called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	h.adminMu.Lock()
	srvErr := h.srvErr // nil, never ready, without an admin server
	h.adminMu.Unlock()
	stopWatch := h.backs.WatchExternal(ctx)
	stopFiles := h.watchFiles(ctx)
	h.watchMemory(ctx)

	h.run.begin(ctx, cancel)
	for _, b := range h.bindings() {
		h.run.start(b)
	}
	select {
	case <-ctx.Done():
	case err := <-srvErr:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.run.fail(fmt.Errorf("host: admin server: %w", err))
		}
	}
	h.ready.Store(false)
	h.log.Info("host shutting down")
	stopFiles()
	errs, stuck := h.run.finishWithin(h.cfg.Shutdown.Grace + ShutdownSlack)
	stopWatch()
	h.stopAdminWithin(ShutdownSlack)
	if len(stuck) > 0 {
		errs = append(errs, h.abandon(stuck))
	}
	// Bounded: what is left to wait for is a reload in progress (ShutdownSlack) and the
	// pools of bindings that stopped, whose calls have returned.
	ctx, cancelClose := context.WithTimeout(context.Background(), ShutdownSlack)
	defer cancelClose()
	errs = append(errs, h.close(ctx, stuck))
	h.log.Info("host stopped")
	return errors.Join(errs...)
}

// Close releases everything New built: plugins, pools, backends and the runtime. Run calls
// it on its way out, bounded (see ShutdownBound); call it yourself only for a Host that
// never ran. It waits for a reload in progress and for calls still running until ctx ends.
// It is idempotent.
func (h *Host) Close(ctx context.Context) error { return h.close(ctx, nil) }

// close is Close leaving the stuck bindings (abandoned by Run) and the runtime their calls
// still run in open: closing them could only wait for those calls, or pull their code from
// under them.
func (h *Host) close(ctx context.Context, stuck []*binding) error {
	h.closeOnce.Do(func() {
		h.ready.Store(false)
		h.closed.Store(true)
		var errs []error
		// A reload in progress finishes first (later ones see closed), unless ctx ends.
		if err := h.reloadMu.lock(ctx); err != nil {
			h.log.Error("closing without waiting for the reload in progress any longer", "err", err)
			errs = append(errs, fmt.Errorf("host: close: a reload in progress did not finish: %w", err))
		} else {
			h.reloadMu.unlock()
		}
		h.stopAdmin()
		h.jobs.stop()
		for _, b := range h.bindings() {
			if !slices.Contains(stuck, b) {
				errs = append(errs, b.close(ctx))
			}
		}
		errs = append(errs, h.backs.Close())
		if len(stuck) == 0 {
			errs = append(errs, h.engine.Close(ctx))
		}
		h.closeErr = errors.Join(errs...)
	})
	return h.closeErr
}

// Notify wakes the listener of the binding that reads tenant's queue (push wake-up), so a
// message just sent is received without waiting for the next poll.
func (h *Host) Notify(tenant, queue string) error {
	found := false
	for _, b := range h.bindings() {
		if b.tenant.name == tenant && b.reads(queue) {
			b.lis.Notify()
			found = true
		}
	}
	if !found {
		return fmt.Errorf("host: notify %s/%s: no binding reads this queue: %w", tenant, queue, ErrNotFound)
	}
	return nil
}

// Reload re-reads the config file, the modules and the plugin binaries and applies what
// changed (see ReloadAll); SIGHUP calls it.
func (h *Host) Reload(ctx context.Context) error {
	_, err := h.ReloadAll(ctx)
	return err
}

// SetConfigLoader sets how a reload re-reads the config. By default it reads the file the
// config came from (Config.File) with the environment's WQHOST_ overrides; a host started
// with command-line overrides passes a loader that applies them too, or a reload would see
// them as changes (and refuse those that need a restart). A host whose config has no file
// reloads modules and plugins only, unless a loader is set.
func (h *Host) SetConfigLoader(load func() (*config.Config, error)) {
	_ = h.reloadMu.lock(context.Background())
	defer h.reloadMu.unlock()
	h.loadConfig = load
}

// Registry returns the host's own Prometheus registry (no global state): per tenant,
// binding and queue counters and gauges, handler latency, pool instances, plugin state.
func (h *Host) Registry() *prometheus.Registry { return h.metrics.reg }

// AdminHandler returns the admin API handler with the web console under /console/ (what
// Run serves): use it with httptest or to mount the API on a server of your own.
// Tenants' tokens follow config reloads.
func (h *Host) AdminHandler() http.Handler {
	hd, _ := h.adminHandler()
	return hd
}

// adminHandler is AdminHandler and the console's Close, which ends its live streams.
func (h *Host) adminHandler() (http.Handler, func()) {
	tokens := func() admin.Tokens { return *h.tokens.Load() }
	api := admin.New(adminHost{h}, admin.Options{
		TokenSource:  tokens,
		MaxBodyBytes: int64(h.cfg.Admin.MaxBodyBytes), MaxSendBytes: maxSendBytes(h.cfg), Gatherer: h.metrics.reg, Logger: h.log,
	})
	con := console.New(console.Options{API: api, Tokens: tokens, Logger: h.log})
	mux := http.NewServeMux()
	mux.Handle("/console/", con)
	mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	mux.Handle("/", api)
	return mux, con.Close
}

func tokenOf(env string) string {
	if env == "" {
		return ""
	}
	return os.Getenv(env)
}

// adminHost adapts Host to admin.Host.
type adminHost struct{ h *Host }

func (a adminHost) Readiness() admin.Readiness { return a.h.Readiness() }
func (a adminHost) Status(ctx context.Context, q admin.StatusQuery) any {
	return a.h.StatusPage(ctx, q)
}
func (a adminHost) Reload(ctx context.Context) (any, error)          { return a.h.ReloadAll(ctx) }
func (a adminHost) HasTenant(name string) bool                       { return a.h.tenantNamed(name) != nil }
func (a adminHost) Notify(_ context.Context, tenant, q string) error { return a.h.Notify(tenant, q) }
func (a adminHost) IsNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidQueue) || errors.Is(err, config.ErrNotConfigured)
}
