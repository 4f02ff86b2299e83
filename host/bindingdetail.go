package host

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// BindingDetail is one binding as the console's binding page shows it (GET
// /v1/tenants/{tenant}/bindings/{binding}): its status, the module versions it ran since it
// was built (oldest first, at most 16), its scaler's recent answers (at most 64) and its
// idle cost.
type BindingDetail struct {
	Tenant  string            `json:"tenant"`
	Binding string            `json:"binding"`
	Status  BindingStatus     `json:"status"`
	History []VersionRecord   `json:"history"`
	Scaling []ScalingDecision `json:"scaling"`
	Idle    IdleCost          `json:"idle"`
	// RolledBackFrom is the digest a rollback replaced while the module file still holds
	// it: reloads leave the rollback serving until the file changes to other bytes.
	RolledBackFrom string `json:"rolled_back_from,omitempty"`
}

// IdleCost is what a binding's idle polling costs: its empty receives (billed calls that
// found nothing) per hour since it was built, and the idle poll budget it shares, if its
// backend sets idle_calls_per_hour (azure).
type IdleCost struct {
	EmptyReceives uint64  `json:"empty_receives"`
	CallsPerHour  float64 `json:"calls_per_hour"`
	Push          bool    `json:"push"`
	// BudgetCallsPerHour is the backend's idle_calls_per_hour, shared by BudgetBindings
	// bindings; BoundMs the longest an idle queue of them waits for its next receive.
	BudgetCallsPerHour int     `json:"budget_calls_per_hour,omitempty"`
	BudgetBindings     int     `json:"budget_bindings,omitempty"`
	BoundMs            float64 `json:"bound_ms,omitempty"`
}

// bindingOf returns the binding name of tenant serving now, or an error wrapping
// ErrNotFound.
func (h *Host) bindingOf(tenant, name string) (*binding, error) {
	for _, b := range h.bindings() {
		if b.tenant.name == tenant && b.name == name {
			return b, nil
		}
	}
	return nil, fmt.Errorf("host: tenants.%s.bindings.%s: no such binding: %w", tenant, name, ErrNotFound)
}

// BindingDetail returns one binding's status, hot-swap history, scaling decisions and idle
// cost.
func (h *Host) BindingDetail(ctx context.Context, tenant, name string) (BindingDetail, error) {
	b, err := h.bindingOf(tenant, name)
	if err != nil {
		return BindingDetail{}, err
	}
	st := b.status(ctx)
	ls := b.lis.State()
	hist, scaling, from, created := b.hist.snapshot(ls)
	d := BindingDetail{Tenant: tenant, Binding: name, Status: st, History: hist, Scaling: scaling, RolledBackFrom: from}
	d.Idle = IdleCost{EmptyReceives: ls.EmptyReceives, Push: b.cfg.Push}
	if hours := time.Since(created).Hours(); hours > 0 {
		d.Idle.CallsPerHour = float64(ls.EmptyReceives) / hours
	}
	if bud, _ := h.idle.budget(h.cfg, b.cfg.Backend); bud != nil && !b.cfg.Push {
		bc, _ := h.cfg.BackendFor(b.cfg.Backend)
		n := 0
		for _, o := range h.bindings() {
			if o.cfg.Backend == b.cfg.Backend && !o.cfg.Push {
				n++
			}
		}
		d.Idle.BudgetCallsPerHour, d.Idle.BudgetBindings, d.Idle.BoundMs = bc.IdleCallsPerHour, n, ms(bud.Bound(n))
	}
	return d, nil
}

// Rollback re-activates the previous module version of a tenant's binding (the last one
// swapped out; after a rollback, the version it replaced): its compiled module, kept since
// the swap, gets a fresh pool and serves from now on. It fails with ErrNoPreviousVersion
// when the binding ran no other version since it was built.
//
// A rollback outlives reloads of the same file: while the module file still holds the
// version the rollback replaced, a reload (file watcher, SIGHUP, POST /v1/reload) leaves the
// rollback serving. Once the file holds other bytes (a fix uploaded), the next reload swaps
// them in as usual. A config reload that rebuilds the binding starts it afresh from the
// file, with an empty history.
func (h *Host) Rollback(ctx context.Context, tenant, name string) (BindingReload, error) {
	if err := h.reloadMu.lock(ctx); err != nil {
		return BindingReload{}, fmt.Errorf("host: rollback: waiting for the reload in progress: %w", err)
	}
	defer h.reloadMu.unlock()
	if h.closed.Load() {
		return BindingReload{}, errors.New("host: rollback: host closed")
	}
	b, err := h.bindingOf(tenant, name)
	if err != nil {
		return BindingReload{}, err
	}
	return b.rollback(ctx)
}

func (a adminHost) Binding(ctx context.Context, tenant, name string) (any, error) {
	return a.h.BindingDetail(ctx, tenant, name)
}

func (a adminHost) Rollback(ctx context.Context, tenant, name string) (any, error) {
	return a.h.Rollback(ctx, tenant, name)
}

func (a adminHost) IsConflict(err error) bool { return errors.Is(err, ErrNoPreviousVersion) }
