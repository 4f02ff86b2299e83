package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Memory budgets: every large consumer of the host's memory reserves what it is about to
// take from its tenant's budget, which reserves it from the host's, before it allocates; a
// reservation that does not fit is refused with a *BudgetError, never taken anyway.
//
// Why: each call's limits hold (a guest's memory limit, the compile budget of one child),
// but a tenant using only legal modules and messages could still add them up past the
// process's memory: warm instances of several bindings, Extism kernel memory, the machine
// code of every version loaded, compile children running at once. Under a container's
// memory limit that is an OOM kill of every tenant, and a crash loop, since a restart loads
// the same modules. A budget turns that into one tenant's refusal: the message is retried
// later, or the binding does not start (a reload leaves the old version serving).
//
// What counts is what the host pays, not what a guest could ask for: a memory is reserved
// as it grows (a refused reservation is a refused memory.grow, which the guest sees as at
// its limit), machine code as the size a compile child measured for it, a compile child as
// its whole memory limit. Reservations are released when the memory is freed, the module
// closed, the child gone.

// ErrMemoryBudget marks a reservation refused by a memory budget (a *BudgetError).
var ErrMemoryBudget = errors.New("memory budget exhausted")

// Consumer is what a reservation is for.
type Consumer int

// The consumers of a memory budget.
const (
	// ConsumerInstances is guest linear memory of pooled and fresh instances.
	ConsumerInstances Consumer = iota
	// ConsumerKernel is Extism kernel memory (blocks allocated through extism:host/env).
	ConsumerKernel
	// ConsumerModules is compiled modules held in the host: machine code, the decoded
	// module and its bytes.
	ConsumerModules
	// ConsumerCompile is compile children, each at its memory limit.
	ConsumerCompile
	numConsumers
)

var consumerNames = [numConsumers]string{"instance memory", "kernel memory", "compiled modules", "compile children"}

// String is the consumer's name, as errors, metrics and the admin API say it.
func (c Consumer) String() string {
	if c < 0 || c >= numConsumers {
		return fmt.Sprintf("consumer(%d)", int(c))
	}
	return consumerNames[c]
}

// Key is the consumer's name as a metric label and JSON key: instances, kernel, modules,
// compile.
func (c Consumer) Key() string {
	return [...]string{"instances", "kernel", "modules", "compile"}[c]
}

// BudgetError is a refused reservation: who asked, for what, and how full the budget was.
type BudgetError struct {
	// Budget names the budget that refused: "host" or "tenant NAME".
	Budget string
	// Consumer is what the reservation was for.
	Consumer Consumer
	// What names the asker: binding and module, or the module being compiled.
	What string
	// Want is the reservation's size, Reserved and Limit the budget's state when refused.
	Want, Reserved, Limit int64
}

// Error says which budget refused whom, for how much.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("%s: %s memory budget: %s asked for %d bytes of %s, %d of its %d bytes are reserved",
		ErrMemoryBudget, e.Budget, e.What, e.Want, e.Consumer, e.Reserved, e.Limit)
}

// Unwrap makes errors.Is(err, ErrMemoryBudget) true.
func (e *BudgetError) Unwrap() error { return ErrMemoryBudget }

// BudgetUsage is a budget's state.
type BudgetUsage struct {
	// Limit is the budget in bytes; 0: unlimited.
	Limit int64 `json:"limit_bytes"`
	// Reserved is what is reserved now, Peak the most ever reserved at once.
	Reserved int64 `json:"reserved_bytes"`
	Peak     int64 `json:"peak_bytes"`
	// ByConsumer is Reserved by consumer (Consumer.Key).
	ByConsumer map[string]int64 `json:"by_consumer"`
	// Refused counts refused reservations.
	Refused int64 `json:"refused"`
}

// memBudget is one budget: the host's, or a tenant's whose parent is the host's. A
// reservation fits when it fits in the budget and in every parent.
type memBudget struct {
	name   string
	limit  int64 // <= 0: unlimited
	parent *memBudget

	mu       sync.Mutex
	reserved int64
	peak     int64
	by       [numConsumers]int64
	refused  int64
	// freed is closed, and replaced, whenever something is released: reserveWait's
	// waiters try again then.
	freed chan struct{}
}

func newMemBudget(name string, limit int64, parent *memBudget) *memBudget {
	return &memBudget{name: name, limit: limit, parent: parent, freed: make(chan struct{})}
}

// reserve takes n bytes for c from b and its parents, or refuses, naming what asked.
func (b *memBudget) reserve(c Consumer, n int64, what string) error {
	if b == nil || n <= 0 {
		return nil
	}
	return b.take(c, n, what, false, true)
}

// force takes n bytes even past the limit: for what has been allocated already and must be
// counted (a memory's initial pages, which wazero gives no way to refuse).
func (b *memBudget) force(c Consumer, n int64) {
	if b != nil && n > 0 {
		_ = b.take(c, n, "", true, false)
	}
}

// take reserves n in b and in its parents, or in none of them: a refusal is counted (with
// count) by the budget that refused and every budget below it.
//
// The whole chain is locked, child before parent (every take locks in that order, and
// nothing else holds two), and checked before anything is taken. Taking from b first and
// undoing it when a parent refused left a trace: b's peak kept a reservation b never held
// (a tenant with room whose host was full showed the refused growth as its peak), and
// another reservation of b's, meanwhile, could be refused for room b was about to give back.
func (b *memBudget) take(c Consumer, n int64, what string, force, count bool) error {
	var buf [4]*memBudget // a tenant and the host: deeper chains allocate
	chain := buf[:0]
	for x := b; x != nil; x = x.parent {
		x.mu.Lock()
		chain = append(chain, x)
	}
	defer func() {
		for _, x := range chain {
			x.mu.Unlock()
		}
	}()
	if !force {
		for i, x := range chain {
			if x.limit > 0 && x.reserved+n > x.limit {
				if count {
					for _, y := range chain[:i+1] {
						y.refused++
					}
				}
				return &BudgetError{Budget: x.name, Consumer: c, What: what, Want: n, Reserved: x.reserved, Limit: x.limit}
			}
		}
	}
	for _, x := range chain {
		x.reserved += n
		x.by[c] += n
		x.peak = max(x.peak, x.reserved)
	}
	return nil
}

// release gives back n bytes of c reserved before.
func (b *memBudget) release(c Consumer, n int64) {
	if b == nil || n <= 0 {
		return
	}
	for ; b != nil; b = b.parent {
		b.mu.Lock()
		b.reserved -= n
		b.by[c] -= n
		close(b.freed)
		b.freed = make(chan struct{})
		b.mu.Unlock()
	}
}

// reserveWait is reserve that waits, while n could fit once others release, until it does or
// ctx ends: for work that may queue (compile children) rather than fail when the budget is
// merely busy. A reservation larger than a whole budget is refused at once.
func (b *memBudget) reserveWait(ctx context.Context, c Consumer, n int64, what string) error {
	if b == nil || n <= 0 {
		return nil
	}
	for {
		// Wait on the changes of the budget that refused: a tenant's release also
		// releases in the host's.
		var wait <-chan struct{}
		err := b.take(c, n, what, false, false)
		var be *BudgetError
		if err == nil || !errors.As(err, &be) {
			return err
		}
		if be.Want > be.Limit {
			// Never fits: a refusal.
			return b.take(c, n, what, false, true)
		}
		for x := b; x != nil; x = x.parent {
			if x.name == be.Budget {
				x.mu.Lock()
				wait = x.freed
				fits := x.reserved+n <= x.limit
				x.mu.Unlock()
				if fits {
					wait = nil
				}
			}
		}
		if wait == nil {
			continue
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return fmt.Errorf("%w (waited until: %w)", err, context.Cause(ctx))
		}
	}
}

// usage is the budget's state now.
func (b *memBudget) usage() BudgetUsage {
	if b == nil {
		return BudgetUsage{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := BudgetUsage{Limit: max(b.limit, 0), Reserved: b.reserved, Peak: b.peak, Refused: b.refused,
		ByConsumer: make(map[string]int64, numConsumers)}
	for c := range numConsumers {
		u.ByConsumer[c.Key()] = b.by[c]
	}
	return u
}
