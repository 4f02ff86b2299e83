package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wqhost/wqhost/host/admin"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/runtime"
)

// configReload is what reloadConfig did.
type configReload struct {
	status   string // unchanged, reloaded, failed
	bindings []boundReload
	tenants  []TenantReload
}

type boundReload struct {
	BindingReload
	b *binding // the binding serving afterwards (nil when removed or failed)
}

// bindingChange is one binding a config reload starts (old nil), stops (new nil) or
// replaces.
type bindingChange struct{ old, new *binding }

// tenantPlan is what a config reload does to one tenant, decided and built before anything
// serving is touched.
type tenantPlan struct {
	name    string
	result  string   // ReloadAdded, ReloadRemoved, ReloadRebuilt, ReloadUpdated, or "" (settings unchanged)
	changed []string // the tenant's settings that changed, as config keys
	old     *tenant  // serving now; nil when added
	new     *tenant  // built by the reload when added or rebuilt
	cfg     config.Tenant
	binds   []bindingChange
}

// liveTenantKey reports whether a config reload applies a tenant setting without restarting
// the tenant's bindings: these live in the fair scheduler and the admin token set, which the
// bindings do not copy.
func liveTenantKey(k string) bool {
	switch k {
	case "weight", "max_concurrency", "token_env":
		return true
	}
	return false
}

// reloadConfig re-reads the config file and applies a changed one at the finest grain it
// can. Tenants added are built and started, tenants removed stopped and their runtime
// closed. A tenant whose limits (or module_dir) changed is rebuilt: all its bindings restart
// on the new limits, on a new runtime if limits.memory changed (the old one is closed once
// its bindings have stopped), on the tenant's runtime otherwise. A changed
// weight, max_concurrency or token is applied in place, its bindings untouched, unless a
// limiter must be added or removed (max_concurrency to or from 0). Within a tenant that is
// not rebuilt, bindings whose config is unchanged keep running untouched (their module is
// still checked by the caller); changed bindings are rebuilt and restarted; new ones are
// built and started; removed ones are stopped after their in-flight messages finish.
// Everything new is built before anything is stopped, so a config that does not load, does
// not validate or names a module that fails changes nothing. The host-wide max_concurrency
// applies live, and so does log.level when the host holds its logger's level (SetLogLevel);
// other settings outside the tenants (backends, admin, data_dir, log.format) need a
// restart: they are refused with an error naming them.
func (h *Host) reloadConfig(ctx context.Context) (configReload, error) {
	res := configReload{status: "failed"}
	load := h.loadConfig
	if load == nil {
		load = func() (*config.Config, error) { return source.LoadConfig(config.LoadOptions{File: h.cfg.File}) }
	}
	next, err := load()
	if err != nil {
		return res, fmt.Errorf("config reload (the running config stays): %w", err)
	}
	cur := h.live.Load()
	if diff := restartOnlyChanges(cur, next, h.liveLogKeys()...); len(diff) > 0 {
		return res, fmt.Errorf("config reload (the running config stays): %s changed; these need a restart", strings.Join(diff, ", "))
	}
	tokens, errs := tokensFor(next)
	plans, buildErrs := h.planTenants(ctx, cur, next, h.tokens.Load(), &tokens)
	errs = append(errs, buildErrs...)
	if len(errs) > 0 {
		h.discardPlans(plans)
		return res, fmt.Errorf("config reload (the running config stays): %w", errors.Join(errs...))
	}
	budgetChanged := cur.MaxConcurrency != next.MaxConcurrency
	changed := budgetChanged
	for _, p := range plans {
		changed = changed || p.result != "" || len(p.binds) > 0
	}
	if err := h.applyLogLevel(cur, next); err != nil {
		h.discardPlans(plans)
		return res, fmt.Errorf("config reload (the running config stays): %w", err)
	}
	h.live.Store(next)
	if !changed {
		res.status = "unchanged" // e.g. comments or key order: nothing to apply
		return res, nil
	}
	// Tokens first: a revoked or rotated token is refused from here on, even while the
	// tenant's bindings drain.
	h.tokens.Store(&tokens)
	if budgetChanged {
		h.sched.SetTotal(next.MaxConcurrency)
		h.log.Info("config reload: host max_concurrency changed", "from", cur.MaxConcurrency, "to", next.MaxConcurrency)
	}
	var stopped []*binding
	for _, p := range plans {
		errs = append(errs, h.applyTenant(ctx, p, &res, &stopped)...)
	}
	// Shares move as tenants come and go or change weight: applied in place.
	h.applyMemoryBudgets(next)
	h.forgetSeries(stopped)
	res.status = "reloaded"
	return res, errors.Join(errs...)
}

// planTenants decides what the reload does to each tenant and builds every tenant and
// binding it needs, without touching anything serving. On error the caller discards what
// was built so far (discardPlans).
func (h *Host) planTenants(ctx context.Context, cur, next *config.Config, curTok, nextTok *admin.Tokens) ([]*tenantPlan, []error) {
	running := map[string][]*binding{}
	for _, b := range h.bindings() {
		running[b.tenant.name] = append(running[b.tenant.name], b)
	}
	names := slices.Sorted(maps.Keys(cur.Tenants))
	for tn := range next.Tenants {
		if _, ok := cur.Tenants[tn]; !ok {
			names = append(names, tn)
		}
	}
	slices.Sort(names)
	var plans []*tenantPlan
	var errs []error
	for _, tn := range names {
		oc, inCur := cur.Tenants[tn]
		nc, inNext := next.Tenants[tn]
		p := &tenantPlan{name: tn, cfg: nc, old: h.tenantNamed(tn)}
		plans = append(plans, p)
		olds := map[string]*binding{}
		for _, b := range running[tn] {
			olds[b.name] = b
		}
		switch {
		case !inNext:
			p.result = ReloadRemoved
		case !inCur:
			p.result = ReloadAdded
		default:
			p.changed = config.Diff(oc, nc, "bindings")
			if curTok.Tenants[tn] != nextTok.Tenants[tn] && !slices.Contains(p.changed, "token_env") {
				p.changed = append(p.changed, "token_env") // same variable, another value
			}
			rebuild := needsLimiter(oc, cur.MaxConcurrency) != needsLimiter(nc, next.MaxConcurrency)
			if rebuild && cur.MaxConcurrency != next.MaxConcurrency && oc.MaxConcurrency == nc.MaxConcurrency {
				p.changed = append(p.changed, "max_concurrency (of the host)")
			}
			for _, k := range p.changed {
				rebuild = rebuild || !liveTenantKey(k)
			}
			switch {
			case rebuild:
				p.result = ReloadRebuilt
			case len(p.changed) > 0:
				p.result = ReloadUpdated
			}
		}
		if p.result == ReloadRemoved {
			for _, bn := range slices.Sorted(maps.Keys(olds)) {
				p.binds = append(p.binds, bindingChange{old: olds[bn]})
			}
			continue
		}
		t := p.old
		if p.result == ReloadAdded || p.result == ReloadRebuilt {
			var rt *runtime.Tenant // nil: a fresh runtime
			if p.old != nil && p.old.rt.Limits() == runtimeLimits(nc) {
				// Pools of the old and the new bindings can share a runtime; only a new
				// memory limit needs another one.
				rt = p.old.rt
			}
			nt, err := h.newTenant(tn, nc, next.MaxConcurrency, next.TenantMemoryBudget(tn, h.mem.budget), rt)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if p.old != nil {
				nt.usage = p.old.usage // the tenant's counters go on
				if p.old.quota != nil && nt.quota != nil {
					p.old.quota.set(nc.Limits.FuelQuota) // and its quota's period
					nt.quota = p.old.quota
				}
			}
			t, p.new = nt, nt
		}
		for _, bn := range slices.Sorted(maps.Keys(nc.Bindings)) {
			bc := nc.Bindings[bn]
			old := olds[bn]
			delete(olds, bn)
			if p.new == nil && old != nil && reflect.DeepEqual(old.cfg, bc) {
				continue
			}
			nb, err := h.newBinding(ctx, t, bn, bc)
			if err != nil {
				errs = append(errs, fmt.Errorf("tenants.%s.bindings.%s: %w", tn, bn, err))
				continue
			}
			p.binds = append(p.binds, bindingChange{old: old, new: nb})
		}
		for _, bn := range slices.Sorted(maps.Keys(olds)) {
			p.binds = append(p.binds, bindingChange{old: olds[bn]})
		}
	}
	return plans, errs
}

// discardPlans closes what planTenants built for a reload that is refused: the new bindings,
// then the new runtimes, which only those bindings used.
func (h *Host) discardPlans(plans []*tenantPlan) {
	ctx := context.Background()
	for _, p := range plans {
		clean := true
		for _, c := range p.binds {
			if c.new != nil && c.new.close(ctx) != nil {
				clean = false
			}
		}
		if p.new != nil && (p.old == nil || p.new.rt != p.old.rt) {
			if !clean {
				h.pinned[p.new.rt] = true
				continue
			}
			if err := h.closeRuntime(ctx, p.new.rt); err != nil {
				h.log.Warn("config reload refused: closing the runtime built for it failed", "tenant", p.name, "err", err)
			}
		}
	}
}

// closeRuntime closes a runtime tenant no binding serves on any more, unless one that
// failed to stop may still hold pools on it (pinned).
func (h *Host) closeRuntime(ctx context.Context, rt *runtime.Tenant) error {
	if h.pinned[rt] {
		h.log.Warn("config reload: runtime kept open until the host stops: a binding on it failed to stop", "tenant", rt.Name())
		return nil
	}
	// Nothing runs on rt any more: a reload whose deadline has just passed must still free
	// it rather than leave it half closed.
	if err := rt.Close(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("closing its runtime: %w", err)
	}
	if h.rtClosed != nil {
		h.rtClosed(rt)
	}
	return nil
}

// installTenant makes the tenant a reload built serve: registered, sharing the scheduler, its
// bindings started.
func (h *Host) installTenant(p *tenantPlan) {
	h.setTenant(p.name, p.new)
	if p.new.limiter != nil {
		h.sched.Add(p.new.limiter)
	}
	for _, c := range p.binds {
		if c.new != nil {
			h.addBinding(c.new)
		}
	}
}

// applyTenant carries out a plan built by planTenants. It records what it did in res and
// the bindings it stopped in stopped, and returns the errors of stopping bindings and of
// closing the runtime of a tenant removed or moved to a new one. A binding that failed to
// stop in time pins its runtime open (see Host.pinned); nothing new can fail any more.
func (h *Host) applyTenant(ctx context.Context, p *tenantPlan, res *configReload, stopped *[]*binding) []error {
	var errs []error
	var rtErr error // closing the old runtime
	stopErr := map[*binding]error{}
	switch p.result {
	case ReloadRemoved, ReloadRebuilt:
		// The whole tenant goes: stop its bindings together, so its queues wait for the
		// slowest drain rather than the sum of all.
		var olds []*binding
		for _, c := range p.binds {
			if c.old != nil {
				olds = append(olds, c.old)
			}
		}
		stopErr = h.stopBindings(ctx, olds)
		*stopped = append(*stopped, olds...)
		if len(stopErr) > 0 {
			h.pinned[p.old.rt] = true
		}
		if p.old.limiter != nil {
			h.sched.Remove(p.old.limiter)
		}
		if p.result == ReloadRemoved || p.new.rt != p.old.rt {
			// Every binding on the old runtime has stopped and closed its pools (or pinned it).
			if err := h.closeRuntime(ctx, p.old.rt); err != nil {
				rtErr = err
				errs = append(errs, fmt.Errorf("tenants.%s: %w", p.name, err))
			}
		}
		if p.result == ReloadRemoved {
			h.setTenant(p.name, nil)
			break
		}
		h.installTenant(p)
	case ReloadAdded:
		h.installTenant(p)
	default:
		// Same tenant: its settings that changed apply in place, then binding by binding.
		t := p.old
		t.cfg.Store(&p.cfg)
		if t.limiter != nil {
			t.limiter.Set(p.cfg.Weight, p.cfg.MaxConcurrency)
		}
		for _, c := range p.binds {
			if c.old != nil {
				if err := h.stopBinding(ctx, c.old); err != nil {
					stopErr[c.old] = err
					h.pinned[t.rt] = true
				}
				*stopped = append(*stopped, c.old)
			}
			if c.new != nil {
				h.addBinding(c.new)
			}
		}
	}
	if p.result != "" {
		tr := TenantReload{Tenant: p.name, Result: p.result, Changed: p.changed}
		for _, c := range p.binds {
			if err := stopErr[c.old]; err != nil {
				tr.Error = "stopping its bindings: " + err.Error()
				break
			}
		}
		if tr.Error == "" && rtErr != nil {
			tr.Error = rtErr.Error()
		}
		h.log.Info("config reload: tenant "+p.result, "tenant", p.name, "changed", p.changed, "bindings", len(p.binds))
		res.tenants = append(res.tenants, tr)
	}
	for _, c := range p.binds {
		br := boundReload{b: c.new}
		switch {
		case c.old == nil:
			br.BindingReload = BindingReload{Tenant: p.name, Binding: c.new.name, Result: ReloadAdded}
		case c.new == nil:
			br.BindingReload = BindingReload{Tenant: p.name, Binding: c.old.name, Result: ReloadRemoved}
		default:
			br.BindingReload = BindingReload{Tenant: p.name, Binding: c.new.name, Result: ReloadRebuilt}
		}
		if c.new != nil {
			br.Digest = c.new.cur.Load().module.Digest()
		}
		if err := stopErr[c.old]; c.old != nil && err != nil {
			br.Error = err.Error()
			errs = append(errs, fmt.Errorf("tenants.%s.bindings.%s: stopping: %w", p.name, c.old.name, err))
		}
		h.log.Info("config reload: binding "+br.Result, "tenant", br.Tenant, "binding", br.Binding)
		res.bindings = append(res.bindings, br)
	}
	return errs
}

// stopBindings stops bs concurrently and returns the error of each that failed.
func (h *Host) stopBindings(ctx context.Context, bs []*binding) map[*binding]error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := map[*binding]error{}
	for _, b := range bs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.stopBinding(ctx, b); err != nil {
				mu.Lock()
				errs[b] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// forgetSeries deletes the latency series of stopped bindings that no serving binding
// reports under the same labels (a binding rebuilt in place keeps its series; with
// metrics.per_binding false, a tenant's series stays while any of its bindings serves), so a
// removed tenant or binding disappears from /metrics. The other series are read from Status
// at scrape time and disappear with the binding.
func (h *Host) forgetSeries(stopped []*binding) {
	key := func(b *binding) string {
		return strings.Join(h.metrics.labelValues(b.tenant.name, b.name, b.cfg.Queue), "\x00")
	}
	serving := map[string]bool{}
	for _, b := range h.bindings() {
		serving[key(b)] = true
	}
	for _, b := range stopped {
		if !serving[key(b)] {
			h.metrics.latency.DeleteLabelValues(h.metrics.labelValues(b.tenant.name, b.name, b.cfg.Queue)...)
		}
	}
}

// restartOnlyChanges lists what differs between two configs that a reload cannot apply:
// the settings outside the tenants other than max_concurrency, max_bindings and the keys
// in live (applied in place).
func restartOnlyChanges(cur, next *config.Config, live ...string) []string {
	// max_bindings only bounds the config a load accepts: the new config passed it.
	return config.Diff(*cur, *next, append([]string{"tenants", "max_concurrency", "max_bindings"}, live...)...)
}

// addBinding makes b serve: listed in status and, if Run is running, started.
func (h *Host) addBinding(b *binding) {
	h.addServing(b)
	h.run.start(b)
}

// stopBinding stops b's listener (in-flight messages finish within its shutdown grace,
// leased ones are released), removes it from the host and closes it. It waits for the
// listener until ctx ends or, handlers that do not return being abandoned like at shutdown,
// the grace plus ShutdownSlack has passed.
func (h *Host) stopBinding(ctx context.Context, b *binding) error {
	h.removeServing(b)
	stop, done := h.run.stopping(b)
	if stop != nil {
		stop()
		bound := time.NewTimer(h.cfg.Shutdown.Grace + ShutdownSlack)
		defer bound.Stop()
		var err error
		select {
		case <-done:
			h.run.reap(b)
		case <-ctx.Done():
			err = ctx.Err()
		case <-bound.C:
			ids := b.calls.list()
			b.log.Error("stopping the binding: handlers still running after the shutdown grace; abandoned, their messages left leased for redelivery",
				"message_ids", ids)
			err = fmt.Errorf("%w: messages %v", ErrAbandoned, ids)
		}
		if err != nil {
			// Its end is still collected (and an error still stops the host) when it comes.
			go func() {
				<-done
				h.run.reap(b)
			}()
			return err
		}
	}
	return b.close(ctx)
}
