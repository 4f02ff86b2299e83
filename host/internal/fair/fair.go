// Package fair is the fair scheduler of handler calls: the host-wide budget
// (max_concurrency) shared by weight among the tenants that have work, each within its own
// cap, and a tenant's slots shared the same way among its bindings. It knows nothing of the
// host: the host registers a Share per tenant and a Binding per binding, and the listener
// acquires through them (listener.Limiter).
//
// One lock, Scheduler.mu, guards every share and binding of a scheduler; nothing else is
// locked under it.
package fair

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wqhost/wqhost/listener"
)

// Scheduler shares the host-wide budget of handler calls (max_concurrency) among the
// tenants that have work, in proportion to their weights, each within its own cap.
//
// Slots are handed out one at a time: when one is free, it goes to the waiting tenant with
// the lowest calls-in-flight/weight, so a tenant's share follows its weight while it has
// work, and an idle tenant's share goes to the busy ones (an idle tenant has no waiter and
// is not considered). Ties go to the tenant whose oldest waiter has waited longest: a
// tenant at the lowest ratio is served next whatever the others do, so none starves.
//
// A tenant at its cap waits without taking a slot of the budget, so a capped tenant never
// holds the share of the others.
//
// Within a tenant, the slot goes the same way to the waiting binding with the lowest
// calls-in-flight/weight (ties: the older head waiter): a binding whose calls keep running
// to their time limit holds its slots longer, but each slot it frees goes to a binding
// below its share first, so it cannot keep more than its share of the tenant's slots while
// the others have work.
type Scheduler struct {
	total int          // host-wide budget; 0 = no budget (tenant caps only); guarded by mu
	held  atomic.Int64 // slots granted, for status

	mu      sync.Mutex
	inUse   int
	seq     uint64 // waiter arrival order, for ties
	tenants []*Share
}

// Share is one tenant's view of the scheduler: the listener.Limiter its bindings use.
type Share struct {
	s      *Scheduler
	name   string
	weight int          // guarded by s.mu
	cap    int          // 0 = no cap of its own; guarded by s.mu
	held   atomic.Int64 // calls in flight, for status
	peak   atomic.Int64 // highest calls in flight seen
	waits  atomic.Int64 // calls that had to queue for a slot

	// Guarded by s.mu.
	inUse    int
	nwait    int        // waiters over all its bindings
	bindings []*Binding // those registered
	def      *Binding   // the share's own Acquire (tests, and callers without bindings)
}

// Binding is one binding's view of its tenant's share: the listener.Limiter it uses.
type Binding struct {
	t      *Share
	name   string
	weight int          // guarded by t.s.mu
	held   atomic.Int64 // calls in flight, for status

	// Guarded by t.s.mu.
	inUse   int
	waiters []*waiter // FIFO
}

type waiter struct {
	seq     uint64
	ready   chan struct{} // closed when granted
	granted bool
}

// New returns a scheduler of total slots shared by the tenants added; 0 means no budget
// (tenant caps only).
func New(total int) *Scheduler { return &Scheduler{total: total} }

// NewShare returns a share that is not registered yet: a config reload builds a tenant's
// share with its bindings and registers it only once nothing can fail any more. Its calls
// must not Acquire before Add (they would never be dispatched a slot).
func (s *Scheduler) NewShare(name string, weight, maxConcurrency int) *Share {
	t := &Share{s: s, name: name, weight: max(weight, 1), cap: maxConcurrency}
	t.def = &Binding{t: t, weight: 1}
	t.bindings = []*Binding{t.def}
	return t
}

// Binding registers a binding of t with weight (< 1 counts as 1): its calls share t's
// slots with t's other bindings by weight.
func (t *Share) Binding(name string, weight int) *Binding {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	b := &Binding{t: t, name: name, weight: max(weight, 1)}
	t.bindings = append(t.bindings, b)
	return b
}

// Drop unregisters b (a binding removed or rebuilt) once its listener has stopped. Calls
// still holding one of its slots release them as usual.
func (b *Binding) Drop() {
	s := b.t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	b.t.bindings = slices.DeleteFunc(b.t.bindings, func(x *Binding) bool { return x == b })
}

// Add registers t, so free slots are dispatched to its waiters.
func (s *Scheduler) Add(t *Share) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenants = append(s.tenants, t)
}

// Remove unregisters t (a tenant removed or rebuilt by a config reload) once its bindings
// have stopped. Calls still holding one of its slots release them as usual.
func (s *Scheduler) Remove(t *Share) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenants = slices.DeleteFunc(s.tenants, func(x *Share) bool { return x == t })
}

// SetTotal changes the host-wide budget (a config reload); 0 means no budget. Lowering it
// below the slots in use lets the running calls finish: new ones wait until there is room.
func (s *Scheduler) SetTotal(total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total = total
	s.dispatchLocked()
}

// Budget returns the host-wide budget in force; 0 means none.
func (s *Scheduler) Budget() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Set changes t's weight and cap in place (a config reload), so the tenant's bindings keep
// running. Lowering the cap below the calls in flight lets them finish.
func (t *Share) Set(weight, maxConcurrency int) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	t.weight, t.cap = max(weight, 1), maxConcurrency
	s.dispatchLocked()
}

// Held returns the slots of the budget granted now.
func (s *Scheduler) Held() int64 { return s.held.Load() }

// ShareStats is a tenant's share as status shows it.
type ShareStats struct {
	Weight, Cap int   // in force (Set)
	Held        int64 // calls in flight
	Peak        int64 // highest calls in flight seen
	Waits       int64 // calls that had to queue for a slot
}

// Stats returns t's settings in force and its counts.
func (t *Share) Stats() ShareStats {
	t.s.mu.Lock()
	weight, limit := t.weight, t.cap
	t.s.mu.Unlock()
	return ShareStats{Weight: weight, Cap: limit, Held: t.held.Load(), Peak: t.peak.Load(), Waits: t.waits.Load()}
}

// canRunLocked reports whether t may take one more slot now.
func (s *Scheduler) canRunLocked(t *Share) bool {
	return (t.cap == 0 || t.inUse < t.cap) && (s.total == 0 || s.inUse < s.total)
}

func (s *Scheduler) grantLocked(b *Binding) {
	t := b.t
	b.inUse++
	b.held.Add(1)
	t.inUse++
	s.inUse++
	s.held.Add(1)
	if n := t.held.Add(1); n > t.peak.Load() {
		t.peak.Store(n)
	}
}

// dispatchLocked hands free slots to waiters, lowest in-flight/weight first.
func (s *Scheduler) dispatchLocked() {
	for s.total == 0 || s.inUse < s.total {
		var best *Share
		for _, t := range s.tenants {
			if t.nwait == 0 || (t.cap > 0 && t.inUse >= t.cap) {
				continue
			}
			if best == nil || before(t.inUse, t.weight, t.oldestLocked(), best.inUse, best.weight, best.oldestLocked()) {
				best = t
			}
		}
		if best == nil {
			return
		}
		var bb *Binding
		for _, b := range best.bindings {
			if len(b.waiters) == 0 {
				continue
			}
			if bb == nil || before(b.inUse, b.weight, b.waiters[0].seq, bb.inUse, bb.weight, bb.waiters[0].seq) {
				bb = b
			}
		}
		w := bb.waiters[0]
		bb.waiters = bb.waiters[1:]
		best.nwait--
		w.granted = true
		s.grantLocked(bb)
		close(w.ready)
	}
}

// oldestLocked returns the arrival of t's oldest waiter (t has one).
func (t *Share) oldestLocked() uint64 {
	oldest := uint64(math.MaxUint64)
	for _, b := range t.bindings {
		if len(b.waiters) > 0 {
			oldest = min(oldest, b.waiters[0].seq)
		}
	}
	return oldest
}

// before orders candidates, tenants or bindings: lower inUse/weight first (compared
// without division), then the older head waiter.
func before(aUse, aWeight int, aSeq uint64, bUse, bWeight int, bSeq uint64) bool {
	l, r := aUse*bWeight, bUse*aWeight
	if l != r {
		return l < r
	}
	return aSeq < bSeq
}

// Acquire implements listener.Limiter (for the tenant's own calls, outside its bindings).
func (t *Share) Acquire(ctx context.Context) error { return t.def.Acquire(ctx) }

// Release implements listener.Limiter.
func (t *Share) Release() { t.def.Release() }

// Acquire implements listener.Limiter.
func (b *Binding) Acquire(ctx context.Context) error {
	w := b.request()
	if w == nil {
		return nil
	}
	return b.wait(ctx, w)
}

// request takes a slot at once if b's tenant may run and has no earlier waiter (it
// returns nil), or queues a waiter for the next slot dispatched to b.
func (b *Binding) request() *waiter {
	t := b.t
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.nwait == 0 && s.canRunLocked(t) {
		// A free slot means no other tenant or binding can use it (every release
		// dispatches), so taking it first is fair.
		s.grantLocked(b)
		return nil
	}
	t.waits.Add(1)
	s.seq++
	w := &waiter{seq: s.seq, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	t.nwait++
	return w
}

func (b *Binding) wait(ctx context.Context, w *waiter) error {
	t := b.t
	s := t.s
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.granted {
			// Granted as ctx ended: hand the slot on.
			s.releaseLocked(b)
			return ctx.Err()
		}
		for i, x := range b.waiters {
			if x == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				t.nwait--
				break
			}
		}
		return ctx.Err()
	}
}

// Release implements listener.Limiter.
func (b *Binding) Release() {
	b.t.s.mu.Lock()
	defer b.t.s.mu.Unlock()
	b.t.s.releaseLocked(b)
}

func (s *Scheduler) releaseLocked(b *Binding) {
	t := b.t
	b.inUse--
	b.held.Add(-1)
	t.inUse--
	s.inUse--
	s.held.Add(-1)
	t.held.Add(-1)
	s.dispatchLocked()
}

var (
	_ listener.Limiter = (*Share)(nil)
	_ listener.Limiter = (*Binding)(nil)
)
