package host

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/pollbudget"
)

// idleBudgets holds the idle polling budget of each azure backend that sets
// idle_calls_per_hour: one per backend (one storage account, billed as one), shared by its
// bindings without push. The zero value is ready to use.
type idleBudgets struct {
	mu sync.Mutex
	by map[string]*pollbudget.Budget
}

// budget returns the named backend's budget, or nil when it has none.
func (ib *idleBudgets) budget(cfg *config.Config, name string) (*pollbudget.Budget, error) {
	bc, ok := cfg.BackendFor(name)
	if !ok || bc.Type != config.BackendAzure || bc.IdleCallsPerHour == 0 {
		return nil, nil
	}
	ib.mu.Lock()
	defer ib.mu.Unlock()
	if b, ok := ib.by[name]; ok {
		return b, nil
	}
	b, err := pollbudget.New(pollbudget.Options{CallsPerHour: bc.IdleCallsPerHour})
	if err != nil {
		return nil, fmt.Errorf("backends.%s.idle_calls_per_hour: %w", name, err)
	}
	if ib.by == nil {
		ib.by = map[string]*pollbudget.Budget{}
	}
	ib.by[name] = b
	return b, nil
}

// pacer returns the listener.Config.IdlePacer of a binding: a place in its backend's budget,
// or nil without one or with push (whose idle receives are push_fallback_poll's).
func (ib *idleBudgets) pacer(cfg *config.Config, bc config.Binding) (listener.IdlePacer, error) {
	if bc.Push {
		return nil, nil
	}
	b, err := ib.budget(cfg, bc.Backend)
	if b == nil || err != nil {
		return nil, err
	}
	return b.Queue(), nil
}

// logIdleBudgets logs, per budget, the bound on any paced binding's wait for its next
// receive with the bindings that share it now.
func (h *Host) logIdleBudgets() {
	n := map[string]int{}
	for _, b := range h.bindings() {
		if bud, _ := h.idle.budget(h.cfg, b.cfg.Backend); bud != nil && !b.cfg.Push {
			n[b.cfg.Backend]++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(n)) {
		bud, _ := h.idle.budget(h.cfg, name)
		bc, _ := h.cfg.BackendFor(name)
		h.log.Info("idle poll budget: every idle queue is polled at least every "+bud.Bound(n[name]).String(),
			"backend", name, "idle_calls_per_hour", bc.IdleCallsPerHour, "bindings", n[name],
			"bound", bud.Bound(n[name]))
	}
}
