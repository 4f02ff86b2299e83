package host

import (
	"context"
	"slices"
	"time"

	"github.com/wqhost/wqhost/host/admin"
	"github.com/wqhost/wqhost/internal/buildinfo"
	"github.com/wqhost/wqhost/plugins/external"
	"github.com/wqhost/wqhost/runtime"
)

// Status is the host's state as GET /v1/status returns it.
type Status struct {
	Ready     bool      `json:"ready"`
	StartedAt time.Time `json:"started_at"`
	// BindingsUp of BindingsTotal bindings are built: while the host starts, those of the
	// config built so far; once ready, both are the bindings serving (as /readyz says).
	BindingsUp    int `json:"bindings_up"`
	BindingsTotal int `json:"bindings_total"`
	// Page says which bindings Tenants holds (GET /v1/status?tenant=&limit=&offset=).
	Page Page `json:"page"`
	// MaxConcurrency is the host-wide budget of handler calls (0 = no cap); Running the
	// calls holding one of its slots.
	MaxConcurrency int   `json:"max_concurrency"`
	Running        int64 `json:"running"`
	// Memory is the host's memory budget: its limit, what its tenants and compile
	// children reserve, by consumer, and the process's resident memory. Absent for a
	// tenant's token: it sums every tenant's use.
	Memory  *MemoryStatus  `json:"memory,omitempty"`
	Tenants []TenantStatus `json:"tenants"`
	// LastConfigReloadError is why the last config reload failed (the running config stayed);
	// empty once a reload succeeds.
	LastConfigReloadError   string     `json:"last_config_reload_error,omitempty"`
	LastConfigReloadErrorAt *time.Time `json:"last_config_reload_error_at,omitempty"`
	// LastConfigReloadSuccessAt is when the config running now was loaded: at start, or by
	// the last reload that succeeded.
	LastConfigReloadSuccessAt time.Time `json:"last_config_reload_success_at"`
	// Build is the binary running: version, commit, Go toolchain.
	Build buildinfo.Info `json:"build"`
}

// ConfigReloadFailedForTenant is what a tenant's token reads as last_config_reload_error:
// the host's error names other tenants' keys.
const ConfigReloadFailedForTenant = "the config file failed to load; the host runs its previous config (the host token's status says why)"

// StatusQuery selects a tenant's bindings and a page of them (admin.StatusQuery).
type StatusQuery = admin.StatusQuery

// Page is the part of the bindings a Status holds: Returned bindings from Offset in
// (tenant, binding) order, of Total bindings (of Tenant, when set). Limit 0 means all.
type Page struct {
	Tenant   string `json:"tenant,omitempty"`
	Offset   int    `json:"offset"`
	Limit    int    `json:"limit"`
	Returned int    `json:"returned"`
	Total    int    `json:"total"`
}

// TenantStatus is one tenant's state.
type TenantStatus struct {
	Name           string `json:"name"`
	Weight         int    `json:"weight"`
	MaxConcurrency int    `json:"max_concurrency"` // 0 = no cap
	Running        int64  `json:"running"`         // handler calls holding a tenant slot
	// Usage sums the metering of the tenant's handler calls (docs/metering.md); Quota is
	// its fuel quota's state, absent without limits.fuel_quota.
	Usage UsageStatus  `json:"usage"`
	Quota *QuotaStatus `json:"fuel_quota,omitempty"`
	// Memory is the tenant's memory budget: limit, reserved by consumer, refusals.
	Memory   runtime.BudgetUsage `json:"memory"`
	Bindings []BindingStatus     `json:"bindings"`
}

// BindingStatus is one binding's state: the listener's counters, the module, the pool and
// the plugins.
type BindingStatus struct {
	Name          string `json:"name"`
	Queue         string `json:"queue"`          // the tenant-local input queue name
	PhysicalQueue string `json:"physical_queue"` // its name on the backend
	Output        string `json:"output,omitempty"`
	Backend       string `json:"backend"`

	// Depth and DeadLetterDepth are the listener's last reads (no call per status): -1
	// until the listener has read them once, at its start.
	Depth           int64 `json:"depth"`
	DeadLetterDepth int64 `json:"dead_letter_depth"`
	// Messages splits Depth for scaling (docs/deploy.md): read with it, no call per status.
	Messages    DepthSplit `json:"messages"`
	Workers     int        `json:"workers"`
	PeakWorkers int        `json:"peak_workers"`
	// HelperWorkers counts workers started to receive while a slow message held its
	// batch's worker (listener.State.HelperWorkers).
	HelperWorkers uint64 `json:"helper_workers"`
	InFlight      int    `json:"in_flight"`
	Processed     uint64 `json:"processed"`
	Failed        uint64 `json:"failed"`
	Retried       uint64 `json:"retried"`
	Poisoned      uint64 `json:"poisoned"`

	QueueCalls QueueCalls `json:"queue_calls"`

	// Leased is the messages leased and not yet through their handler call (at most the
	// pool's max_instances plus as many prefetched); LeasedIdle those not started yet.
	Leased     int    `json:"leased"`
	LeasedIdle int    `json:"leased_idle"`
	LeasesLost uint64 `json:"leases_lost"`

	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`

	Module         string    `json:"module"`
	ModuleDigest   string    `json:"module_digest"`
	ModuleLoadedAt time.Time `json:"module_loaded_at"`
	ABI            string    `json:"abi"`
	// Reloads counts module versions swapped in since the binding started. LastReloadError
	// is why the last reload attempt was refused ("" once a later one succeeded or the file
	// is back to the serving bytes): the version in ModuleDigest still serves.
	Reloads           uint64     `json:"reloads"`
	LastReloadError   string     `json:"last_reload_error,omitempty"`
	LastReloadErrorAt *time.Time `json:"last_reload_error_at,omitempty"`
	Pool              PoolStatus `json:"pool"`
	// HTTP sums the outbound requests of the binding's messages.
	HTTP HTTPStatus `json:"http"`
	// Usage sums the metering of the binding's handler calls (docs/metering.md).
	Usage UsageStatus `json:"usage"`

	Plugins []PluginStatus `json:"plugins,omitempty"`

	// Running is the binding's handler calls holding a slot; Breaker its circuit breaker.
	Running int64         `json:"running"`
	Breaker BreakerStatus `json:"breaker"`
	// LastScaling is the scaler's last recorded answer (history.go), if it was asked yet.
	LastScaling *ScalingDecision `json:"last_scaling,omitempty"`
}

// DepthSplit is the input queue's depth split into visible, leased (in flight, or released
// for a retry later) and delayed (sent with a delay) messages. Exact: the backend split it
// (memory, local, sharded), queue-wide. Otherwise (azure) Visible is the approximate depth
// less the messages this host holds, Leased those this host holds, and Delayed 0 (delayed
// messages and other hosts' leases are in Visible).
type DepthSplit struct {
	Visible int64 `json:"visible"`
	Leased  int64 `json:"leased"`
	Delayed int64 `json:"delayed"`
	Exact   bool  `json:"exact"`
}

// QueueCalls are the whitepaper's cost model: every backend call the listener made.
type QueueCalls struct {
	Receives      uint64 `json:"receives"`
	EmptyReceives uint64 `json:"empty_receives"`
	Deletes       uint64 `json:"deletes"`
	Updates       uint64 `json:"updates"`
	Sends         uint64 `json:"sends"` // dead letters, and the handler's outputs
	Errors        uint64 `json:"errors"`
	DepthQueries  uint64 `json:"depth_queries"` // input and dead-letter depth reads
}

// PoolStatus is a binding's instance pool.
type PoolStatus struct {
	Instances int   `json:"instances"`
	Idle      int   `json:"idle"`
	Busy      int   `json:"busy"`
	Calls     int64 `json:"calls"`
	Discarded int64 `json:"discarded"`
	Traps     int64 `json:"traps"`
	Timeouts  int64 `json:"timeouts"`
}

// BreakerStatus is a binding's circuit breaker (docs/configuration.md, "Circuit breaker").
type BreakerStatus struct {
	// State is closed (running as configured), open (leasing nothing until the cool-down
	// ends) or half-open (one message at a time, as a probe).
	State string `json:"state"`
	// Trips counts the times it opened; CooldownMs is the current (last) cool-down.
	Trips      uint64  `json:"trips"`
	CooldownMs float64 `json:"cooldown_ms"`
}

// PluginStatus is an external policy plugin's state.
type PluginStatus struct {
	Policy    string `json:"policy"` // backoff, scaler or poison
	Path      string `json:"path"`
	Phase     string `json:"phase"` // running, restarting, failed, closed
	Pid       int    `json:"pid"`
	Restarts  uint64 `json:"restarts"`
	Calls     uint64 `json:"calls"`
	Timeouts  uint64 `json:"timeouts"`
	Fallbacks uint64 `json:"fallbacks"`
	Clamped   uint64 `json:"clamped"`
	LastError string `json:"last_error,omitempty"`
}

// Status returns a snapshot of every tenant and binding. It makes no queue call: depths are
// the ones each listener keeps (read by the listener itself at a bounded, counted rate; see
// listener.Listener.State), so a status page or a metrics scrape costs nothing billed.
func (h *Host) Status(ctx context.Context) Status { return h.StatusPage(ctx, StatusQuery{}) }

// StatusPage is Status restricted to q: one tenant's bindings when q.Tenant is set, and of
// those q.Limit (0: all) from q.Offset. Only the bindings returned are read, so a page of
// 100 costs the same on a host of 10 or 10,000 bindings. Without a limit or offset every
// tenant q selects is listed, even one with no binding yet (a start in progress); with one,
// only the tenants of the bindings in the page.
func (h *Host) StatusPage(ctx context.Context, q StatusQuery) Status {
	rd := h.Readiness()
	st := Status{
		Ready: rd.Ready, StartedAt: h.started, BindingsUp: rd.BindingsUp, BindingsTotal: rd.BindingsTotal,
		MaxConcurrency: h.sched.Budget(), Tenants: []TenantStatus{},
	}
	if !q.ForTenant {
		st.Memory = h.memoryStatus()
	}
	st.LastConfigReloadError, st.LastConfigReloadErrorAt = h.configErr.get()
	if q.ForTenant && st.LastConfigReloadError != "" {
		// The error quotes keys of every tenant (tenants.<other>.bindings…): a tenant's
		// token learns that the reload failed, not another tenant's names.
		st.LastConfigReloadError = ConfigReloadFailedForTenant
	}
	st.LastConfigReloadSuccessAt = h.configErr.lastSuccess()
	st.Build = buildinfo.Read()
	if st.MaxConcurrency > 0 {
		st.Running = h.sched.Held()
	}
	tenants := map[string]*tenant{}
	var order []*tenant
	for _, t := range h.tenantList() {
		if q.Tenant == "" || t.name == q.Tenant {
			tenants[t.name] = t
			order = append(order, t)
		}
	}
	// A binding whose tenant is not listed is one a config reload is adding or removing.
	binds := slices.DeleteFunc(h.bindings(), func(b *binding) bool { return tenants[b.tenant.name] == nil })
	lo := min(max(q.Offset, 0), len(binds))
	hi := len(binds)
	if q.Limit > 0 {
		hi = min(lo+q.Limit, hi)
	}
	st.Page = Page{Tenant: q.Tenant, Offset: q.Offset, Limit: q.Limit, Returned: hi - lo, Total: len(binds)}

	byTenant := map[string]int{}
	add := func(t *tenant) int {
		tc := t.conf()
		ts := TenantStatus{Name: t.name, Weight: tc.Weight, MaxConcurrency: tc.MaxConcurrency, Usage: t.usage.status(), Quota: t.quota.status(), Bindings: []BindingStatus{},
			Memory: t.rt.MemoryBudget()}
		if t.limiter != nil {
			ts.Running = t.limiter.Stats().Held
		}
		byTenant[t.name] = len(st.Tenants)
		st.Tenants = append(st.Tenants, ts)
		return byTenant[t.name]
	}
	if q.Limit == 0 && q.Offset == 0 {
		for _, t := range order {
			add(t)
		}
	}
	for _, b := range binds[lo:hi] {
		i, ok := byTenant[b.tenant.name]
		if !ok {
			i = add(tenants[b.tenant.name])
		}
		st.Tenants[i].Bindings = append(st.Tenants[i].Bindings, b.status(ctx))
	}
	return st
}

func (b *binding) status(ctx context.Context) BindingStatus {
	ls := b.lis.State()
	depth, dead := ls.Depth, ls.DeadLetterDepth
	v := b.cur.Load()
	ps := v.pool.Stats()
	b.mu.Lock()
	lastErr, lastErrAt, reloads, old := b.lastErr, b.lastErrAt, b.reloads, b.retiredStats
	b.mu.Unlock()
	bs := BindingStatus{
		Name: b.name, Queue: b.cfg.Queue, PhysicalQueue: b.physical, Output: b.cfg.Output, Backend: b.cfg.Backend,
		Depth: depth, DeadLetterDepth: dead,
		Messages: DepthSplit{Visible: ls.Counts.Visible, Leased: ls.Counts.Leased, Delayed: ls.Counts.Delayed, Exact: ls.CountsExact},
		Workers:  ls.ActiveWorkers, PeakWorkers: ls.PeakWorkers, HelperWorkers: ls.HelperWorkers, InFlight: ls.InFlight,
		Processed: ls.Processed, Failed: ls.Failed, Retried: ls.Retried, Poisoned: ls.Poisoned,
		QueueCalls: QueueCalls{
			Receives: ls.Receives, EmptyReceives: ls.EmptyReceives, Deletes: ls.Deletes,
			Updates: ls.Updates, Sends: ls.Sends + b.outSends.Load(), Errors: ls.Errors + b.outErrors.Load(),
			DepthQueries: ls.DepthQueries,
		},
		Leased: ls.Leased, LeasedIdle: ls.LeasedIdle, LeasesLost: ls.LeasesLost,
		LatencyP50Ms: ms(ls.LatencyP50), LatencyP99Ms: ms(ls.LatencyP99),
		Module: b.cfg.Module, ModuleDigest: v.module.Digest(), ModuleLoadedAt: v.loadedAt, ABI: string(v.module.ABI()),
		Reloads: reloads, LastReloadError: lastErr,
		Pool: PoolStatus{
			Instances: ps.Instances, Idle: ps.Idle, Busy: ps.Busy, Calls: ps.Calls + old.Calls,
			Discarded: ps.Discarded + old.Discarded, Traps: ps.Traps + old.Traps, Timeouts: ps.Timeouts + old.Timeouts,
		},
	}
	bs.HTTP = httpStatus(ps.HTTP, old.HTTP)
	bs.Usage = b.usage.status()
	gs := b.gate.Status()
	bs.Running, bs.Breaker = gs.Running, BreakerStatus{State: gs.State, Trips: gs.Trips, CooldownMs: ms(gs.Cooldown)}
	bs.LastScaling = b.hist.last()
	if lastErr != "" {
		bs.LastReloadErrorAt = &lastErrAt
	}
	for _, np := range b.plugins {
		bs.Plugins = append(bs.Plugins, pluginStatus(np.policy, np.p.Status()))
	}
	return bs
}

func pluginStatus(policy string, s external.Status) PluginStatus {
	return PluginStatus{
		Policy: policy, Path: s.Path, Phase: string(s.Phase), Pid: s.Pid, Restarts: s.Restarts,
		Calls: s.Calls, Timeouts: s.Timeouts, Fallbacks: s.Fallbacks, Clamped: s.Clamped, LastError: s.LastError,
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
