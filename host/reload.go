package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/host/internal/backends"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/runtime"
)

// version is one loaded module version of a binding with its pool of instances.
type version struct {
	module   *runtime.Module
	pool     *runtime.Pool
	loadedAt time.Time

	// refs counts calls running on this version. Once retired is set no call starts here:
	// a caller that raced the swap sees retired after counting itself and moves to the new
	// version, so the pool is closed only when the last counted call has returned.
	refs    atomic.Int64
	retired atomic.Bool
	once    sync.Once
	drained chan struct{}
}

func (v *version) release() {
	if v.refs.Add(-1) == 0 && v.retired.Load() {
		v.once.Do(func() { close(v.drained) })
	}
}

// reloader is the part of a binding that hot reload swaps: the serving version, the error
// of the last failed reload, and the retired versions still draining.
type reloader struct {
	cur      atomic.Pointer[version]
	reloadMu sync.Mutex // one reload of a binding at a time
	draining sync.WaitGroup

	mu           sync.Mutex
	lastErr      string
	lastErrAt    time.Time
	reloads      uint64
	retiredStats runtime.PoolStats // counters of closed pools, so metrics stay monotonic

	hist history // versions run, scaling decisions (history.go)
}

// acquire returns the version a new call must use and counts the call on it; release it.
func (r *reloader) acquire() *version {
	for {
		v := r.cur.Load()
		v.refs.Add(1)
		if !v.retired.Load() {
			return v
		}
		v.release()
	}
}

func (r *reloader) setErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.lastErr = ""
		return
	}
	r.lastErr, r.lastErrAt = err.Error(), time.Now()
}

// poolConfig is the pool every version of the binding gets.
func (b *binding) poolConfig() runtime.PoolConfig {
	bc, t := b.cfg, b.tenant.conf()
	return runtime.PoolConfig{
		Binding:        b.name,
		MinInstances:   bc.Pool.MinInstances,
		MaxInstances:   bc.Pool.MaxInstances,
		MaxUses:        bc.Pool.MaxUses,
		MaxMemoryBytes: uint64(bc.Pool.MaxMemory),
		IdleTimeout:    bc.Pool.IdleTimeout,
		Timeout:        t.Limits.Timeout,
		Config:         bc.Config,
		OutputQueue:    bc.Output,
		AllowEmit:      func(q string) error { return backends.CheckOwnQueue(b.h.cfg, b.tenant.name, bc.Backend, q) },
		MaxOutputBytes: b.outputLimit(), // the tenant's, or the backend's if smaller
		HTTP:           httpPolicy(bc.HTTP),
		// The tenant's, 4 × its max_output_bytes by default (outputlimit.go).
		MaxOutputTotalBytes: b.outputTotalLimit(),
		MaxCallOutputBytes:  int(t.Limits.MaxCallOutputBytes),
		// A batching binding's module must export wqhost_handle_batch: checked at load.
		Batch:    bc.Batch.MaxMessages > 1,
		Function: bc.Function,
		// Instances started ahead of demand are charged to the binding (meter.go).
		OnWarmStart: b.meterStart,
	}
}

// buildVersion compiles wasm (once per digest), checks it against the binding's ABI,
// instantiates it once and runs its wqhost_self_test export if any, then warms a pool. None
// of it touches the serving version, so it runs beside live traffic.
func (b *binding) buildVersion(ctx context.Context, wasm []byte) (*version, error) {
	ref := b.cfg.Module
	cl := b.tenant.conf().Limits.Compile
	m, err := b.h.engine.CompileWithLimits(ctx, ref, wasm, runtime.ABI(b.cfg.ABI), runtime.CompileLimits{
		MaxFunctions: cl.MaxFunctions, MaxFunctionBytes: int(cl.MaxFunctionBytes), MaxNestingDepth: cl.MaxNestingDepth,
		MaxLoopDepth: cl.MaxLoopDepth, MaxBranches: cl.MaxBranches, MaxLocals: cl.MaxLocals,
		Timeout: cl.Timeout, MemoryBytes: uint64(cl.Memory),
	})
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", ref, err)
	}
	pc := b.poolConfig()
	if err := b.tenant.rt.Validate(ctx, m, pc); err != nil {
		return nil, fmt.Errorf("module %s: %w", ref, err)
	}
	p, err := b.tenant.rt.NewPool(ctx, m, pc)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", ref, err)
	}
	return &version{module: m, pool: p, loadedAt: time.Now(), drained: make(chan struct{})}, nil
}

// Reload outcomes of one binding or plugin.
const (
	ReloadUnchanged = "unchanged" // same bytes as the serving version
	ReloadSwapped   = "reloaded"  // the new version serves
	ReloadFailed    = "failed"    // the new version was refused; the old one still serves
	ReloadAdded     = "added"     // binding or tenant created by a config reload
	ReloadRemoved   = "removed"   // binding or tenant stopped by a config reload
	ReloadRebuilt   = "rebuilt"   // binding's or tenant's config changed: rebuilt and restarted
	// ReloadUpdated: a tenant's weight, max_concurrency or token changed and was applied in
	// place; its bindings kept running.
	ReloadUpdated = "updated"
)

// TenantReload is what a config reload did to one tenant. Its bindings are reported in
// ReloadResult.Bindings: all added, all removed, or (rebuilt) each restarted.
type TenantReload struct {
	Tenant string `json:"tenant"`
	Result string `json:"result"` // added, removed, rebuilt or updated
	// Changed lists the tenant's settings that changed (config keys such as
	// "limits.timeout"; "bindings" are reported per binding).
	Changed []string `json:"changed,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// BindingReload is what a reload did to one binding.
type BindingReload struct {
	Tenant  string `json:"tenant"`
	Binding string `json:"binding"`
	Result  string `json:"result"`
	Digest  string `json:"digest,omitempty"` // the digest serving afterwards
	Error   string `json:"error,omitempty"`
}

// PluginReload is what a reload did to one policy plugin.
type PluginReload struct {
	Tenant  string `json:"tenant"`
	Binding string `json:"binding"`
	Policy  string `json:"policy"`
	Result  string `json:"result"`
	Error   string `json:"error,omitempty"`
}

// ReloadResult is the outcome of Host.ReloadAll, as POST /v1/reload returns it.
type ReloadResult struct {
	// Config is "unchanged", "reloaded", "failed" (the running config stays) or "none" (the
	// host runs the embedded default, no file to re-read).
	Config      string          `json:"config"`
	ConfigError string          `json:"config_error,omitempty"`
	Bindings    []BindingReload `json:"bindings"`
	Plugins     []PluginReload  `json:"plugins,omitempty"`
	// Tenants lists the tenants a config reload added, removed, rebuilt or updated; the
	// others are left out.
	Tenants []TenantReload `json:"tenants,omitempty"`
}

// reloadModule re-reads the binding's module file and, if its bytes changed, builds the new
// version and swaps it in. A module that fails to load leaves the serving version in place;
// the error is logged and kept for status.
func (b *binding) reloadModule(ctx context.Context) BindingReload {
	b.reloadMu.Lock()
	defer b.reloadMu.Unlock()
	res := BindingReload{Tenant: b.tenant.name, Binding: b.name, Result: ReloadUnchanged}
	cur := b.cur.Load()
	res.Digest = cur.module.Digest()
	if b.h.cfg.ModulePath(b.cfg.Module) == "" {
		return res // builtin: modules are part of the binary
	}
	fail := func(err error) BindingReload {
		b.setErr(err)
		b.log.Error("module reload failed; the previous version keeps serving", "module", b.cfg.Module,
			"serving", res.Digest[:12], "err", err)
		res.Result, res.Error = ReloadFailed, err.Error()
		return res
	}
	wasm, err := source.Module(b.h.cfg, b.cfg.Module)
	if err != nil {
		return fail(err)
	}
	if d := digestOf(wasm); d == res.Digest || b.keepsRollback(d) {
		// A bad upload replaced by the serving bytes is no longer an error; nor is a file
		// still holding the version a rollback replaced, which keeps the rollback serving.
		b.setErr(nil)
		b.settleRollback(d == res.Digest)
		return res
	}
	start := time.Now()
	v, err := b.buildVersion(ctx, wasm)
	if err != nil {
		return fail(err)
	}
	b.swapAs(v, SwapReload)
	b.log.Info("module reloaded", "module", b.cfg.Module, "from", res.Digest[:12], "to", v.module.Digest()[:12],
		"took", time.Since(start))
	res.Result, res.Digest = ReloadSwapped, v.module.Digest()
	return res
}

// reloadModules reloads the modules of bs, par at once, and returns their results in bs'
// order: a module that is slow to compile or start holds up its own binding's reload, not
// the others'.
func reloadModules(ctx context.Context, bs []*binding, par int) []BindingReload {
	out := make([]BindingReload, len(bs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(par, len(bs)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(bs); i = int(next.Add(1)) - 1 {
				out[i] = bs[i].reloadModule(ctx)
			}
		})
	}
	wg.Wait()
	return out
}

// swapAs makes v the serving version for cause (SwapReload, SwapRollback); the old one is
// closed in the background once the calls still running on it have returned.
func (b *binding) swapAs(v *version, cause string) {
	old := b.cur.Swap(v)
	if b.lis != nil {
		b.hist.swapped(v.module, cause, time.Now(), b.lis.State())
	}
	b.setErr(nil)
	if b.gate != nil {
		b.gate.Reset() // the new version is judged on its own calls
	}
	b.mu.Lock()
	b.reloads++
	b.mu.Unlock()
	if old == nil {
		return
	}
	b.draining.Add(1)
	go func() {
		defer b.draining.Done()
		b.retire(context.Background(), old)
	}()
}

// drain stops new calls on v and waits, until ctx ends, for its running ones to return.
func (v *version) drain(ctx context.Context) {
	v.retired.Store(true)
	if v.refs.Load() == 0 {
		v.once.Do(func() { close(v.drained) })
	}
	select {
	case <-v.drained:
	case <-ctx.Done():
	}
}

// retire stops new calls on v, waits for its running ones and closes its pool.
func (b *binding) retire(ctx context.Context, v *version) error {
	v.drain(ctx)
	st := v.pool.Stats()
	err := v.pool.Close(ctx)
	b.mu.Lock()
	b.retiredStats.Calls += st.Calls
	b.retiredStats.Discarded += st.Discarded
	b.retiredStats.Traps += st.Traps
	b.retiredStats.Timeouts += st.Timeouts
	b.retiredStats.HTTP.Add(st.HTTP)
	b.mu.Unlock()
	return err
}

// closeVersions waits for retired versions to drain and closes the serving one.
func (b *binding) closeVersions(ctx context.Context) error {
	done := make(chan struct{})
	go func() { b.draining.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("draining retired module versions: %w", ctx.Err())
	}
	if v := b.cur.Load(); v != nil {
		return b.retire(ctx, v)
	}
	return nil
}

// pluginDigest hashes a plugin binary, or returns "" if it cannot be read.
func fileDigest(path string) string {
	data, err := source.ReadFile(path) // a FIFO swapped in must not hang a reload
	if err != nil {
		return ""
	}
	return digestOf(data)
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// reloadPlugins restarts the binding's plugins whose binary changed on disk (all of them if
// force is set).
func (b *binding) reloadPlugins(ctx context.Context, force bool) []PluginReload {
	var out []PluginReload
	for i := range b.plugins {
		np := b.plugins[i]
		res := PluginReload{Tenant: b.tenant.name, Binding: b.name, Policy: np.policy, Result: ReloadUnchanged}
		d := fileDigest(np.path)
		if !force && (d == "" || d == np.digest.Load().(string)) {
			out = append(out, res)
			continue
		}
		if err := np.p.Reload(ctx); err != nil {
			b.log.Error("plugin reload failed; the previous process keeps serving", "policy", np.policy, "path", np.path, "err", err)
			res.Result, res.Error = ReloadFailed, err.Error()
		} else {
			np.digest.Store(d)
			b.log.Info("plugin reloaded", "policy", np.policy, "path", np.path)
			res.Result = ReloadSwapped
		}
		out = append(out, res)
	}
	return out
}

// ReloadAll re-reads the config file (if the host was loaded from one) and every binding's
// module and plugin binaries, and applies what changed: tenants and bindings added, removed
// or rebuilt (see reloadConfig), a changed module swapped in, a changed plugin binary
// restarted. A config that fails to load or validate changes nothing.
// The error joins every failure; the result says what happened to each binding.
func (h *Host) ReloadAll(ctx context.Context) (ReloadResult, error) {
	return h.reloadAll(ctx, false)
}

// reloadAll is ReloadAll; quiet leaves the config reload's status (metrics, banner) as it
// was when the config turns out unchanged: a look, not a reload an operator asked for.
func (h *Host) reloadAll(ctx context.Context, quiet bool) (ReloadResult, error) {
	res := ReloadResult{Config: "none", Bindings: []BindingReload{}}
	// Waiting for a reload in progress ends with ctx (an admin request's).
	if err := h.reloadMu.lock(ctx); err != nil {
		return res, fmt.Errorf("host: reload: waiting for the reload in progress: %w", err)
	}
	defer h.reloadMu.unlock()
	if h.closed.Load() {
		return res, errors.New("host: reload: host closed")
	}
	if rd := h.Readiness(); rd.Starting {
		// New is still building the bindings a reload would compare against.
		return res, fmt.Errorf("host: reload: host still starting (%d of %d bindings up)", rd.BindingsUp, rd.BindingsTotal)
	}
	var errs []error
	touched := map[*binding]bool{}
	if h.cfg.File != "" || h.loadConfig != nil {
		cr, err := h.reloadConfig(ctx)
		if !quiet || err != nil || cr.status != ReloadUnchanged {
			h.configErr.set(err, time.Now())
		}
		res.Config = cr.status
		if err != nil {
			res.ConfigError = err.Error()
			errs = append(errs, err)
		}
		res.Tenants = cr.tenants
		for _, br := range cr.bindings {
			res.Bindings = append(res.Bindings, br.BindingReload)
			if br.b != nil {
				touched[br.b] = true
			}
		}
	}
	var todo []*binding
	for _, b := range h.bindings() {
		if !touched[b] { // else just built from the new config and the module on disk
			todo = append(todo, b)
		}
	}
	for _, r := range reloadModules(ctx, todo, startParallelism()) {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("tenants.%s.bindings.%s: %s", r.Tenant, r.Binding, r.Error))
		}
		res.Bindings = append(res.Bindings, r)
	}
	for _, b := range h.bindings() {
		for _, pr := range b.reloadPlugins(ctx, false) {
			if pr.Error != "" {
				errs = append(errs, fmt.Errorf("tenants.%s.bindings.%s.%s.plugin: %s", pr.Tenant, pr.Binding, pr.Policy, pr.Error))
			}
			res.Plugins = append(res.Plugins, pr)
		}
	}
	return res, errors.Join(errs...)
}
