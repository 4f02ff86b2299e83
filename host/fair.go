package host

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wqhost/wqhost/listener"
)

// fairScheduler shares the host-wide budget of handler calls (max_concurrency) among the
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
type fairScheduler struct {
	total int          // host-wide budget; 0 = no budget (tenant caps only); guarded by mu
	held  atomic.Int64 // slots granted, for status

	mu      sync.Mutex
	inUse   int
	seq     uint64 // waiter arrival order, for ties
	tenants []*fairShare
}

// fairShare is one tenant's view of the scheduler: the listener.Limiter its bindings use.
type fairShare struct {
	s      *fairScheduler
	name   string
	weight int          // guarded by s.mu
	cap    int          // 0 = no cap of its own; guarded by s.mu
	held   atomic.Int64 // calls in flight, for status
	peak   atomic.Int64 // highest calls in flight seen
	waits  atomic.Int64 // calls that had to queue for a slot

	// Guarded by s.mu.
	inUse   int
	waiters []*fairWaiter // FIFO
}

type fairWaiter struct {
	seq     uint64
	ready   chan struct{} // closed when granted
	granted bool
}

func newFairScheduler(total int) *fairScheduler { return &fairScheduler{total: total} }

// tenant registers a tenant; weight < 1 counts as 1, maxConcurrency 0 means no cap.
func (s *fairScheduler) tenant(name string, weight, maxConcurrency int) *fairShare {
	t := s.newShare(name, weight, maxConcurrency)
	s.add(t)
	return t
}

// newShare returns a share that is not registered yet: a config reload builds a tenant's
// share with its bindings and registers it only once nothing can fail any more. Its calls
// must not Acquire before add (they would never be dispatched a slot).
func (s *fairScheduler) newShare(name string, weight, maxConcurrency int) *fairShare {
	return &fairShare{s: s, name: name, weight: max(weight, 1), cap: maxConcurrency}
}

// add registers t, so free slots are dispatched to its waiters.
func (s *fairScheduler) add(t *fairShare) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenants = append(s.tenants, t)
}

// remove unregisters t (a tenant removed or rebuilt by a config reload) once its bindings
// have stopped. Calls still holding one of its slots release them as usual.
func (s *fairScheduler) remove(t *fairShare) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenants = slices.DeleteFunc(s.tenants, func(x *fairShare) bool { return x == t })
}

// setTotal changes the host-wide budget (a config reload); 0 means no budget. Lowering it
// below the slots in use lets the running calls finish: new ones wait until there is room.
func (s *fairScheduler) setTotal(total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total = total
	s.dispatchLocked()
}

// budget returns the host-wide budget in force; 0 means none.
func (s *fairScheduler) budget() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// set changes t's weight and cap in place (a config reload), so the tenant's bindings keep
// running. Lowering the cap below the calls in flight lets them finish.
func (t *fairShare) set(weight, maxConcurrency int) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	t.weight, t.cap = max(weight, 1), maxConcurrency
	s.dispatchLocked()
}

// settings returns t's weight and cap in force.
func (t *fairShare) settings() (weight, maxConcurrency int) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.weight, t.cap
}

// canRunLocked reports whether t may take one more slot now.
func (s *fairScheduler) canRunLocked(t *fairShare) bool {
	return (t.cap == 0 || t.inUse < t.cap) && (s.total == 0 || s.inUse < s.total)
}

func (s *fairScheduler) grantLocked(t *fairShare) {
	t.inUse++
	s.inUse++
	s.held.Add(1)
	if n := t.held.Add(1); n > t.peak.Load() {
		t.peak.Store(n)
	}
}

// dispatchLocked hands free slots to waiters, lowest in-flight/weight first.
func (s *fairScheduler) dispatchLocked() {
	for s.total == 0 || s.inUse < s.total {
		var best *fairShare
		for _, t := range s.tenants {
			if len(t.waiters) == 0 || (t.cap > 0 && t.inUse >= t.cap) {
				continue
			}
			if best == nil || before(t, best) {
				best = t
			}
		}
		if best == nil {
			return
		}
		w := best.waiters[0]
		best.waiters = best.waiters[1:]
		w.granted = true
		s.grantLocked(best)
		close(w.ready)
	}
}

// before orders candidates: lower inUse/weight first (compared without division), then the
// older head waiter.
func before(a, b *fairShare) bool {
	l, r := a.inUse*b.weight, b.inUse*a.weight
	if l != r {
		return l < r
	}
	return a.waiters[0].seq < b.waiters[0].seq
}

// Acquire implements listener.Limiter.
func (t *fairShare) Acquire(ctx context.Context) error {
	w := t.request()
	if w == nil {
		return nil
	}
	return t.wait(ctx, w)
}

// request takes a slot at once if t may run and has no earlier waiter (it returns nil), or
// queues a waiter for the next slot dispatched to t.
func (t *fairShare) request() *fairWaiter {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(t.waiters) == 0 && s.canRunLocked(t) {
		// A free slot means no other tenant can use it (every release dispatches), so
		// taking it first is fair.
		s.grantLocked(t)
		return nil
	}
	t.waits.Add(1)
	s.seq++
	w := &fairWaiter{seq: s.seq, ready: make(chan struct{})}
	t.waiters = append(t.waiters, w)
	return w
}

func (t *fairShare) wait(ctx context.Context, w *fairWaiter) error {
	s := t.s
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.granted {
			// Granted as ctx ended: hand the slot on.
			s.releaseLocked(t)
			return ctx.Err()
		}
		for i, x := range t.waiters {
			if x == w {
				t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
				break
			}
		}
		return ctx.Err()
	}
}

// Release implements listener.Limiter.
func (t *fairShare) Release() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.releaseLocked(t)
}

func (s *fairScheduler) releaseLocked(t *fairShare) {
	t.inUse--
	s.inUse--
	s.held.Add(-1)
	t.held.Add(-1)
	s.dispatchLocked()
}

var _ listener.Limiter = (*fairShare)(nil)
