package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	// ConsumerInstances is what instances hold: their linear memory, pooled and fresh, and
	// their tables and globals (Pool.newInstance).
	ConsumerInstances Consumer = iota
	// ConsumerKernel is Extism kernel memory (blocks allocated through extism:host/env).
	ConsumerKernel
	// ConsumerModules is compiled modules held in the host: machine code, the decoded
	// module and its bytes.
	ConsumerModules
	// ConsumerCompile is compile children, each at its memory limit.
	ConsumerCompile
	// ConsumerMessages is message bodies and outputs the host holds for a call: bodies
	// while their call runs (the host reserves them, Tenant.ReserveMemory), outputs from
	// the guest's emit until the host has sent them (Result.Release).
	ConsumerMessages
	// ConsumerStacks is guest calls' native stacks, which wazero grows on the Go heap
	// (stack.go).
	ConsumerStacks
	// ConsumerHost is the host's own Go heap outside every other reservation (its
	// queues' clients, the store, the admin API, the pools' bookkeeping), host budget only:
	// the host measures it and sets it (Engine.SetHostHeld), so that what tenants reserve
	// and what the host holds itself add up to the budget, not the budget and the host.
	ConsumerHost
	numConsumers
)

var consumerNames = [numConsumers]string{"instance memory", "kernel memory", "compiled modules", "compile children", "messages", "call stacks", "host"}

// Consumers lists every consumer, in order.
func Consumers() []Consumer {
	cs := make([]Consumer, numConsumers)
	for c := range numConsumers {
		cs[c] = c
	}
	return cs
}

// OnGoHeap reports whether what c reserves lives on the Go heap, which the Go runtime's
// memory limit counts, rather than in mappings or processes of its own.
func (c Consumer) OnGoHeap() bool {
	return c == ConsumerMessages || c == ConsumerStacks || c == ConsumerHost
}

// String is the consumer's name, as errors, metrics and the admin API say it.
func (c Consumer) String() string {
	if c < 0 || c >= numConsumers {
		return fmt.Sprintf("consumer(%d)", int(c))
	}
	return consumerNames[c]
}

// Key is the consumer's name as a metric label and JSON key: instances, kernel, modules,
// compile, messages, stacks, host.
func (c Consumer) Key() string {
	return [...]string{"instances", "kernel", "modules", "compile", "messages", "stacks", "host"}[c]
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
// reservation fits when it fits in the budget and in every parent. Message bodies and
// outputs reserve on every call, so the counters are atomic: a reservation locks the chain
// to check and take at once, a release only subtracts.
type memBudget struct {
	name   string
	limit  atomic.Int64 // <= 0: unlimited
	parent *memBudget

	reserved atomic.Int64
	peak     atomic.Int64
	by       [numConsumers]atomic.Int64
	refused  atomic.Int64

	// waiters counts reserveWait calls waiting; only then does a release wake them, by
	// closing freed (and forgetting it).
	waiters atomic.Int64
	mu      sync.Mutex
	freed   chan struct{}
}

func newMemBudget(name string, limit int64, parent *memBudget) *memBudget {
	b := &memBudget{name: name, parent: parent}
	b.limit.Store(limit)
	return b
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
	var err error
	for i, x := range chain {
		// Releases subtract without the lock: they only make room.
		if limit, cur := x.limit.Load(), x.reserved.Load(); !force && limit > 0 && cur+n > limit {
			if count {
				for _, y := range chain[:i+1] {
					y.refused.Add(1)
				}
			}
			err = &BudgetError{Budget: x.name, Consumer: c, What: what, Want: n, Reserved: cur, Limit: limit}
			break
		}
	}
	for _, x := range chain {
		if err == nil {
			x.notePeak(x.reserved.Add(n))
			x.by[c].Add(n)
		}
		x.mu.Unlock()
	}
	return err
}

func (b *memBudget) notePeak(v int64) {
	for {
		p := b.peak.Load()
		if v <= p || b.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// release gives back n bytes of c reserved before.
func (b *memBudget) release(c Consumer, n int64) {
	if b == nil || n <= 0 {
		return
	}
	for ; b != nil; b = b.parent {
		b.reserved.Add(-n)
		b.by[c].Add(-n)
		b.wake()
	}
}

// wake lets reserveWait's waiters try again.
func (b *memBudget) wake() {
	if b.waiters.Load() == 0 {
		return
	}
	b.mu.Lock()
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

// changed returns a channel closed at the budget's next release or limit change.
func (b *memBudget) changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	return b.freed
}

// reserveWait is reserve that waits, while n could fit once others release, until it does or
// ctx ends: for work that may queue (compile children) rather than fail when the budget is
// merely busy. A reservation larger than a whole budget is refused at once.
func (b *memBudget) reserveWait(ctx context.Context, c Consumer, n int64, what string) error {
	if b == nil || n <= 0 {
		return nil
	}
	for {
		var refusing *memBudget
		for x := b; x != nil; x = x.parent {
			x.waiters.Add(1)
		}
		// Registered before the try: a release between the try and the wait is not missed.
		chans := map[*memBudget]<-chan struct{}{}
		for x := b; x != nil; x = x.parent {
			chans[x] = x.changed()
		}
		err := b.take(c, n, what, false, false)
		var be *BudgetError
		if err != nil && errors.As(err, &be) && be.Want <= be.Limit {
			for x := b; x != nil; x = x.parent {
				if x.name == be.Budget {
					refusing = x
				}
			}
		}
		var wait <-chan struct{}
		if refusing != nil {
			wait = chans[refusing]
		}
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				err = fmt.Errorf("%w (waited until: %w)", err, context.Cause(ctx))
				wait = nil
			}
		}
		for x := b; x != nil; x = x.parent {
			x.waiters.Add(-1)
		}
		switch {
		case err == nil:
			return nil
		case be != nil && be.Want > be.Limit:
			// Never fits: a refusal.
			return b.take(c, n, what, false, true)
		case wait == nil:
			return err
		}
	}
}

// set makes what c holds in b n bytes, whatever the limit: for what is measured after it
// was allocated (the host's own heap), which no refusal could prevent. Only the budget it
// is called on changes, so it is for the host's budget, which has no parent.
func (b *memBudget) set(c Consumer, n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	d := max(n, 0) - b.by[c].Load()
	b.by[c].Add(d)
	b.notePeak(b.reserved.Add(d))
	b.mu.Unlock()
	if d < 0 {
		b.wake()
	}
}

// setLimit changes the budget's limit: reservations past a lowered one stay, and only new
// ones are refused until enough is released.
func (b *memBudget) setLimit(n int64) {
	b.limit.Store(n)
	b.wake()
}

// usage is the budget's state now.
func (b *memBudget) usage() BudgetUsage {
	if b == nil {
		return BudgetUsage{}
	}
	u := BudgetUsage{Limit: max(b.limit.Load(), 0), Reserved: b.reserved.Load(), Peak: b.peak.Load(),
		Refused: b.refused.Load(), ByConsumer: make(map[string]int64, numConsumers)}
	for c := range numConsumers {
		u.ByConsumer[c.Key()] = b.by[c].Load()
	}
	return u
}
