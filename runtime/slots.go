package runtime

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// slots hands out a pool's call slots (at most MaxInstances at once) together with the warm
// instances. A pair of channels (one for slots, one for idle instances) cost four channel
// operations per call, which measured as a fifth of a no-op call's host-side time; a mutex
// round trip on the way in and another on the way out, a tenth. So the last instance to
// finish is parked in hot with its slot, and a call that follows it alone (the common case:
// a worker's next message) takes both with one atomic swap and leaves them with one
// compare-and-swap. Everything else goes through mu.
type slots struct {
	// hot is a warm instance parked with the slot it ran in: that slot is neither free nor
	// held by a call. A release parks an instance only while nobody waits (waiting), and a
	// caller that begins to wait looks at hot after saying so, so no waiter sleeps beside a
	// parked instance.
	hot     atomic.Pointer[instance]
	waiting atomic.Int32 // len(waiters)
	// calls counts calls begun (PoolStats.Calls): unpark and acquire count, unacquire
	// uncounts.
	calls atomic.Int64

	mu      sync.Mutex
	size    int
	free    int             // slots nobody holds
	idle    []*instance     // warm instances, longest idle first; an idle instance holds no slot
	waiters []chan struct{} // callers waiting for a slot, oldest first
	clock   *atomic.Int64   // stamps instances going idle (janitor.now)
}

func newSlots(n int, clock *atomic.Int64) *slots {
	return &slots{size: n, free: n, idle: make([]*instance, 0, n), clock: clock}
}

// acquire takes a slot for a call, waiting for one until ctx is done, and an idle instance
// if there is one (nil otherwise: the caller creates one). It counts the call as begun; a
// caller that then does not make it gives the slot back with unacquire.
func (s *slots) acquire(ctx context.Context) (*instance, error) {
	if inst := s.unpark(); inst != nil {
		return inst, nil
	}
	inst, err := s.take(ctx, true)
	if err == nil {
		s.calls.Add(1)
	}
	return inst, err
}

// unpark takes the parked instance and its slot for a call, counting it, or returns nil.
func (s *slots) unpark() *instance {
	if s.hot.Load() == nil {
		return nil
	}
	inst := s.hot.Swap(nil)
	if inst != nil {
		s.calls.Add(1)
	}
	return inst
}

// park leaves inst and its slot for the next call, if nobody waits for a slot. False: the
// caller releases them.
func (s *slots) park(inst *instance) bool {
	if s.waiting.Load() != 0 {
		return false
	}
	inst.idleAt = time.Duration(s.clock.Load())
	if !s.hot.CompareAndSwap(nil, inst) {
		return false
	}
	// Someone who began to wait as inst was parked may have looked at hot before: unless
	// they took it, take it back, and the slot goes to the oldest waiter.
	return s.waiting.Load() == 0 || !s.hot.CompareAndSwap(inst, nil)
}

// unacquire gives back the slot (and instance, if not nil) of an acquire whose call was not
// made, uncounting it.
func (s *slots) unacquire(inst *instance) {
	s.calls.Add(-1)
	s.release(inst)
}

// take takes a slot; forCall takes an idle instance with it.
func (s *slots) take(ctx context.Context, forCall bool) (*instance, error) {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		var inst *instance
		if forCall {
			inst = s.popLocked()
		}
		s.mu.Unlock()
		return inst, nil
	}
	w := make(chan struct{}, 1)
	s.waiters = append(s.waiters, w)
	s.waiting.Store(int32(len(s.waiters)))
	s.mu.Unlock()
	// A release may have parked an instance before it could see this waiter.
	if inst := s.hot.Swap(nil); inst != nil {
		if !s.dropWaiter(w) {
			// A release handed this waiter a slot as well: pass that one on.
			<-w
			s.release(nil)
		}
		return s.tookHot(inst, forCall), nil
	}
	select {
	case <-w:
	case <-ctx.Done():
		if s.dropWaiter(w) {
			return nil, ctx.Err()
		}
		// The slot was handed over as ctx ended: pass it on rather than lose it.
		<-w
		s.release(nil)
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !forCall {
		return nil, nil
	}
	return s.popLocked(), nil
}

// dropWaiter removes w from the waiters; false if a release took it off to hand it a slot.
func (s *slots) dropWaiter(w chan struct{}) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.waiters, w)
	if i < 0 {
		return false
	}
	s.waiters = slices.Delete(s.waiters, i, i+1)
	s.waiting.Store(int32(len(s.waiters)))
	return true
}

// tookHot accounts for a parked instance take found while it waited: the slot is the
// caller's; the instance too for a call, else it goes idle.
func (s *slots) tookHot(inst *instance, forCall bool) *instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	if forCall {
		return inst
	}
	s.insertIdleLocked(inst)
	return nil
}

// tryAcquire takes a slot without waiting, without an instance.
func (s *slots) tryAcquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free == 0 {
		return false
	}
	s.free--
	return true
}

func (s *slots) popLocked() *instance {
	n := len(s.idle)
	if n == 0 {
		return nil
	}
	inst := s.idle[n-1]
	s.idle[n-1] = nil
	s.idle = s.idle[:n-1]
	return inst
}

// release gives a slot back, with inst (if not nil) as a warm instance; the oldest waiter
// gets the slot directly. It reports false if inst was not kept because the pool already
// holds cap(idle) warm instances: the caller closes it.
func (s *slots) release(inst *instance) (kept bool) {
	if inst != nil && s.park(inst) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if inst != nil && len(s.idle) < cap(s.idle) {
		inst.idleAt = time.Duration(s.clock.Load())
		s.idle = append(s.idle, inst)
		kept = true
	}
	s.freeLocked()
	return kept
}

// freeLocked gives one slot to the oldest waiter, or back to the free ones.
func (s *slots) freeLocked() {
	if len(s.waiters) == 0 {
		s.free++
		return
	}
	w := s.waiters[0]
	s.waiters[0] = nil
	s.waiters = s.waiters[1:]
	s.waiting.Store(int32(len(s.waiters)))
	w <- struct{}{}
}

// unparkLocked moves the parked instance, if any, among the idle ones, its slot to the free
// ones (or a waiter), so that what works on idle and free (reap, drain) sees it.
func (s *slots) unparkLocked() {
	if inst := s.hot.Swap(nil); inst != nil {
		s.insertIdleLocked(inst)
		s.freeLocked()
	}
}

// insertIdleLocked puts a parked instance among the idle ones in idleAt order, which reap
// relies on: instances released while it was parked went idle later. There is room: a
// parked instance was not among the idle.
func (s *slots) insertIdleLocked(inst *instance) {
	i := slices.IndexFunc(s.idle, func(o *instance) bool { return o.idleAt > inst.idleAt })
	if i < 0 {
		i = len(s.idle)
	}
	s.idle = slices.Insert(s.idle, i, inst)
}

// drainIdle removes and returns every idle instance.
func (s *slots) drainIdle() []*instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unparkLocked()
	idle := slices.Clone(s.idle)
	clear(s.idle)
	s.idle = s.idle[:0]
	return idle
}

// counts returns the number of warm instances waiting, of slots held by calls and of calls
// begun.
func (s *slots) counts() (idle, held int, calls int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idle, held = len(s.idle), s.size-s.free
	if s.hot.Load() != nil {
		idle, held = idle+1, held-1
	}
	return idle, held, s.calls.Load()
}

// waitIdle waits until no slot is held (no call in flight) or ctx is done. It takes every
// slot, so callers queued before it go first, then gives them all back: a closing pool uses
// it, and calls after that find the pool closed rather than waiting.
func (s *slots) waitIdle(ctx context.Context) error {
	var err error
	taken := 0
	for range s.size {
		if _, err = s.take(ctx, false); err != nil {
			break
		}
		taken++
	}
	for range taken {
		s.release(nil)
	}
	return err
}

// addIdle adds a warm instance without touching the slots (warming a new pool). It reports
// false if the pool already holds cap(idle) warm instances.
func (s *slots) addIdle(inst *instance) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.idle) >= cap(s.idle) {
		return false
	}
	inst.idleAt = time.Duration(s.clock.Load())
	s.idle = append(s.idle, inst)
	return true
}
