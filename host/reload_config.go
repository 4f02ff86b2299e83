package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/wqhost/wqhost/host/config"
)

// configReload is what reloadConfig did.
type configReload struct {
	status   string // unchanged, reloaded, failed
	bindings []boundReload
}

type boundReload struct {
	BindingReload
	b *binding // the binding serving afterwards (nil when removed or failed)
}

// reloadConfig re-reads the config file and applies a changed one at binding granularity:
// bindings whose config is unchanged keep running untouched (their module is still checked
// by the caller); changed bindings are rebuilt and restarted; new ones are built and
// started; removed ones are stopped after their in-flight messages finish. Every new
// binding is built before anything is stopped, so a config that does not load, does not
// validate or names a module that fails changes nothing. Changes outside the tenants'
// bindings (backends, admin, data_dir, tenants' limits or tokens, tenants added or
// removed) need a restart: they are refused with an error naming them.
func (h *Host) reloadConfig(ctx context.Context) (configReload, error) {
	res := configReload{status: "failed"}
	load := h.loadConfig
	if load == nil {
		load = func() (*config.Config, error) { return config.Load(config.LoadOptions{File: h.cfg.File}) }
	}
	next, err := load()
	if err != nil {
		return res, fmt.Errorf("config reload (the running config stays): %w", err)
	}
	if diff := restartOnlyChanges(h.live.Load(), next); len(diff) > 0 {
		return res, fmt.Errorf("config reload (the running config stays): %s changed; these need a restart", strings.Join(diff, ", "))
	}
	running := map[[2]string]*binding{}
	for _, b := range h.bindings() {
		running[[2]string{b.tenant.name, b.name}] = b
	}
	type change struct {
		old, new *binding
	}
	var changes []change
	var errs []error
	built := func() {
		for _, c := range changes {
			if c.new != nil {
				_ = c.new.close(context.Background())
			}
		}
	}
	for _, tn := range slices.Sorted(maps.Keys(next.Tenants)) {
		t := h.tenants[tn]
		for _, bn := range slices.Sorted(maps.Keys(next.Tenants[tn].Bindings)) {
			bc := next.Tenants[tn].Bindings[bn]
			old := running[[2]string{tn, bn}]
			delete(running, [2]string{tn, bn})
			if old != nil && reflect.DeepEqual(old.cfg, bc) {
				continue
			}
			nb, err := h.newBinding(ctx, t, bn, bc)
			if err != nil {
				errs = append(errs, fmt.Errorf("tenants.%s.bindings.%s: %w", tn, bn, err))
				continue
			}
			changes = append(changes, change{old: old, new: nb})
		}
	}
	for _, old := range running {
		changes = append(changes, change{old: old})
	}
	if len(errs) > 0 {
		built()
		return res, fmt.Errorf("config reload (the running config stays): %w", errors.Join(errs...))
	}
	if len(changes) == 0 {
		res.status = "unchanged"
		h.live.Store(next) // e.g. comments or key order: nothing to apply
		return res, nil
	}
	h.live.Store(next)
	key := func(c change) string {
		b := c.new
		if b == nil {
			b = c.old
		}
		return b.tenant.name + "\x00" + b.name
	}
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(key(a), key(b)) })
	for _, c := range changes {
		br := boundReload{b: c.new}
		switch {
		case c.old == nil:
			br.BindingReload = BindingReload{Tenant: c.new.tenant.name, Binding: c.new.name, Result: ReloadAdded}
		case c.new == nil:
			br.BindingReload = BindingReload{Tenant: c.old.tenant.name, Binding: c.old.name, Result: ReloadRemoved}
		default:
			br.BindingReload = BindingReload{Tenant: c.new.tenant.name, Binding: c.new.name, Result: ReloadRebuilt}
		}
		if c.new != nil {
			br.Digest = c.new.cur.Load().module.Digest()
		}
		if c.old != nil {
			if err := h.stopBinding(ctx, c.old); err != nil {
				br.Error = err.Error()
				errs = append(errs, fmt.Errorf("tenants.%s.bindings.%s: stopping: %w", c.old.tenant.name, c.old.name, err))
			}
		}
		if c.new != nil {
			h.addBinding(c.new)
		}
		h.log.Info("config reload: binding "+br.Result, "tenant", br.Tenant, "binding", br.Binding)
		res.bindings = append(res.bindings, br)
	}
	res.status = "reloaded"
	return res, errors.Join(errs...)
}

// restartOnlyChanges lists what differs between two configs outside the tenants' bindings.
func restartOnlyChanges(cur, next *config.Config) []string {
	var diff []string
	a, b := *cur, *next
	a.Tenants, b.Tenants = nil, nil
	if !reflect.DeepEqual(a, b) {
		diff = append(diff, "settings outside tenants (backends, admin, data_dir, max_concurrency, log, ...)")
	}
	for _, tn := range slices.Sorted(maps.Keys(cur.Tenants)) {
		if _, ok := next.Tenants[tn]; !ok {
			diff = append(diff, "tenants."+tn+" (removed)")
		}
	}
	for _, tn := range slices.Sorted(maps.Keys(next.Tenants)) {
		nt, ok := cur.Tenants[tn]
		if !ok {
			diff = append(diff, "tenants."+tn+" (added)")
			continue
		}
		ot := next.Tenants[tn]
		nt.Bindings, ot.Bindings = nil, nil
		if !reflect.DeepEqual(nt, ot) {
			diff = append(diff, "tenants."+tn+" (settings other than bindings)")
		}
	}
	return diff
}

// addBinding makes b serve: listed in status and, if Run is running, started.
func (h *Host) addBinding(b *binding) {
	h.bindsMu.Lock()
	h.binds = append(h.binds, b)
	slices.SortFunc(h.binds, func(x, y *binding) int {
		return strings.Compare(x.tenant.name+"\x00"+x.name, y.tenant.name+"\x00"+y.name)
	})
	h.bindsMu.Unlock()
	h.runMu.Lock()
	defer h.runMu.Unlock()
	if h.runCtx != nil && !h.runDone {
		h.startLocked(b)
	}
}

// stopBinding stops b's listener (in-flight messages finish within its shutdown grace,
// leased ones are released), removes it from the host and closes it.
func (h *Host) stopBinding(ctx context.Context, b *binding) error {
	h.bindsMu.Lock()
	h.binds = slices.DeleteFunc(h.binds, func(x *binding) bool { return x == b })
	h.bindsMu.Unlock()
	h.runMu.Lock()
	stop, done := b.stop, b.done
	h.runMu.Unlock()
	if stop != nil {
		stop()
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.close(ctx)
}
