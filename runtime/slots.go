package runtime

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// slots hands out a pool's call slots (at most MaxInstances at once) together with the warm
// instances. The uncontended path is one mutex round trip and allocates nothing; a pair of
// channels (one for slots, one for idle instances) cost four channel operations per call,
// which measured as a fifth of a no-op call's host-side time.
type slots struct {
	mu      sync.Mutex
	size    int
	free    int             // slots nobody holds
	idle    []*instance     // warm instances, longest idle first; an idle instance holds no slot
	waiters []chan struct{} // callers waiting for a slot, oldest first
	clock   *atomic.Int64   // stamps instances going idle (janitor.now)
	// calls counts calls begun (PoolStats.Calls). Counted under mu, which acquire holds
	// anyway, it costs a call nothing; an atomic counter of its own measured a twentieth of
	// a no-op call.
	calls int64
}

func newSlots(n int, clock *atomic.Int64) *slots {
	return &slots{size: n, free: n, idle: make([]*instance, 0, n), clock: clock}
}

// acquire takes a slot for a call, waiting for one until ctx is done, and an idle instance
// if there is one (nil otherwise: the caller creates one). It counts the call as begun; a
// caller that then does not make it gives the slot back with unacquire.
func (s *slots) acquire(ctx context.Context) (*instance, error) {
	return s.take(ctx, true)
}

// unacquire gives back the slot (and instance, if not nil) of an acquire whose call was not
// made, uncounting it.
func (s *slots) unacquire(inst *instance) {
	s.mu.Lock()
	s.calls--
	s.mu.Unlock()
	s.release(inst)
}

// take takes a slot; forCall takes an idle instance with it and counts a call.
func (s *slots) take(ctx context.Context, forCall bool) (*instance, error) {
	s.mu.Lock()
	if s.free > 0 {
		s.free--
		var inst *instance
		if forCall {
			inst = s.popLocked()
			s.calls++
		}
		s.mu.Unlock()
		return inst, nil
	}
	w := make(chan struct{}, 1)
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()
	select {
	case <-w:
	case <-ctx.Done():
		s.mu.Lock()
		if i := slices.Index(s.waiters, w); i >= 0 {
			s.waiters = slices.Delete(s.waiters, i, i+1)
			s.mu.Unlock()
			return nil, ctx.Err()
		}
		s.mu.Unlock()
		// The slot was handed over as ctx ended: pass it on rather than lose it.
		<-w
		s.release(nil)
		return nil, ctx.Err()
	}
	if !forCall {
		return nil, nil
	}
	s.mu.Lock()
	inst := s.popLocked()
	s.calls++
	s.mu.Unlock()
	return inst, nil
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if inst != nil && len(s.idle) < cap(s.idle) {
		inst.idleAt = time.Duration(s.clock.Load())
		s.idle = append(s.idle, inst)
		kept = true
	}
	if len(s.waiters) > 0 {
		w := s.waiters[0]
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
		w <- struct{}{}
	} else {
		s.free++
	}
	return kept
}

// drainIdle removes and returns every idle instance.
func (s *slots) drainIdle() []*instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	idle := slices.Clone(s.idle)
	clear(s.idle)
	s.idle = s.idle[:0]
	return idle
}

// counts returns the number of warm instances waiting, of slots held and of calls begun.
func (s *slots) counts() (idle, held int, calls int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idle), s.size - s.free, s.calls
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
