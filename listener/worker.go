package listener

import (
	"context"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// worker is one dequeue worker: it receives batches and processes them until the queue is
// empty and the back-off policy (or the single-waiter rule) tells it to stop, its time slice
// ends, or ctx ends. asIfIdle means it starts as if the queue had been found empty: the
// first work it finds makes it ask the scaler. woken means a wake-up started it.
func (l *Listener) worker(ctx context.Context, asIfIdle, woken bool) {
	defer l.wg.Done()
	b := &batch{l: l}
	defer b.awaitSettled() // before wg.Done: Run returns only once every delete is done
	s := &workerSlot{l: l}
	defer s.release() // the one way a worker's slot is given back, unless stopping gave it
	// idle counts this worker's consecutive empty receives (the whitepaper's idleCount: the
	// first empty receive is 1, a started worker has seen none); rescale is set when the
	// next work found should be met with the scaler's answer.
	idle, rescale := 0, asIfIdle
	sliceEnd := time.Now().Add(l.cfg.TimeSlice)
	// deferred holds messages a batch handler's last call left for the next one.
	var deferred []*queue.Message
	defer func() { l.releaseDeferred(deferred) }()
	for {
		if ctx.Err() != nil {
			return
		}
		if len(deferred) > 0 {
			// Their leases were renewed with the last batch, which expires at b.expires.
			at := b.expires.Add(-l.cfg.VisibilityTimeout)
			b.awaitSettled() // the last call's deletes still use b
			deferred = l.work(ctx, b, deferred, at)
			continue
		}
		// Lease only what can start: wait for room in the lease budget, ask for no more.
		l.taking.Add(1)
		want := l.budget.take(ctx, l.cfg.BatchSize, l.gate)
		l.taking.Add(-1)
		if want == 0 {
			b.awaitSettled() // before the slot is given back
			return
		}
		msgs, sent, err := l.lease(ctx, want)
		b.awaitSettled() // the last batch's deletes ran alongside this receive
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.c.errorCalls.Add(1)
			n, counted := l.countFailure(sent)
			delay := l.errDelay(n)
			if counted && n&(n-1) == 0 { // log the 1st, 2nd, 4th, 8th... failed round of an outage
				l.log.Error("receive failed; backing off", "err", err, "consecutive", n, "delay", delay)
			}
			if !l.onError(ctx, s, delay) {
				return
			}
			rescale = true // work found after the outage is met with the scaler's answer
			continue
		}
		if l.errStreak.Load() != 0 {
			l.recovered()
		}
		if len(msgs) == 0 {
			l.c.emptyReceives.Add(1)
			l.refreshIdleDepths(ctx, idle == 0)
			if woken && !l.dueWake.Swap(false) {
				l.spurious.Add(1) // a wake-up that found nothing
			}
			var ok bool
			if idle, woken, ok = l.onEmpty(ctx, s, idle); !ok {
				return
			}
			// Work found after an empty receive asks the scaler; not after a park, which a
			// scale-up (that already asked it) ended, and onEmpty reports as idle 0.
			rescale = idle > 0
			continue
		}
		woken = false
		l.armDepthTimer(ctx)
		if l.cfg.IdlePacer != nil {
			l.cfg.IdlePacer.Found()
		}
		if l.spurious.Load() != 0 {
			l.spurious.Store(0)
		}
		if l.dueWake.Load() {
			l.dueWake.Store(false)
		}
		now := time.Now()
		switch {
		case rescale:
			idle, rescale = 0, false
			l.scaleUp(ctx, 0)
		case len(msgs) == want && l.scaleStale(now):
			// A full batch: the backlog may have grown since the scaler was last asked.
			l.scaleUp(ctx, 0)
		}
		deferred = l.work(ctx, b, msgs, sent)
		if !time.Now().Before(sliceEnd) && ctx.Err() == nil && len(deferred) == 0 {
			// Hand the slot back even under a backlog: the supervisor re-acquires slots
			// through the scaler, so the worker count follows the load and other bindings
			// get their turn.
			s.handBack = true
			return
		}
	}
}

// workerSlot is one worker's place in l.active, given back exactly once: under l.mu by the
// decision to stop that needs the count it changes (releaseLocked), otherwise by the
// worker's deferred release, whichever way it returns.
type workerSlot struct {
	l        *Listener
	released bool
	// handBack: the time slice ended under a backlog; the supervisor is asked to rescale
	// instead of being told the listener may be idle.
	handBack bool
}

// releaseLocked gives the slot back if it has not been. l.mu must be held.
func (s *workerSlot) releaseLocked() {
	if s.released {
		return
	}
	s.released = true
	if !s.handBack {
		s.l.exitLocked()
		return
	}
	s.l.active--
	s.l.c.activeW.Store(int64(s.l.active))
	select {
	case s.l.rescaleCh <- struct{}{}:
	default:
	}
}

func (s *workerSlot) release() {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	s.releaseLocked()
}

// canStopLocked reports whether a worker may stop: never below MinWorkers, and never the
// last one unless wake-ups reach the listener.
func (l *Listener) canStopLocked() bool {
	return l.active > l.cfg.MinWorkers && (l.active > 1 || l.cfg.Push)
}

// onEmpty handles an empty receive. Only one worker waits on an empty queue (seed 000's
// peek mode): the others stop, or park without calling the queue when MinWorkers keeps
// them. The waiter sleeps as the back-off policy says, waking early on Notify or a Watcher
// or Waiter backend; with Push it does not poll at all, since a wake-up announces any work.
// A last worker of a paced listener, or of a push listener at MinWorkers, stops instead and
// leaves the wait to the supervisor (doze, or waitForWork). It returns the idle count, whether a
// wake-up ended the wait, and false when the worker is to stop.
func (l *Listener) onEmpty(ctx context.Context, s *workerSlot, idle int) (int, bool, bool) {
	for {
		idle++
		// The single-waiter rule first: a worker that finds another one waiting stops or
		// parks whatever the policy would answer (with a waiter running, it may stop exactly
		// when it is above MinWorkers), so asking the policy, maybe an external plugin,
		// would be wasted.
		l.mu.Lock()
		if l.waiting {
			return 0, false, l.yieldLocked(ctx, s)
		}
		if l.active == 1 && (l.cfg.IdlePacer != nil || l.cfg.Push && l.cfg.MinWorkers > 0) {
			// The last worker hands its wait to the supervisor, which waits for the grant or
			// a wake-up, dormant when it can: an idle paced or push listener keeps no worker
			// goroutine. (With Push and MinWorkers 0 the Backoff says when, below.)
			s.releaseLocked()
			l.mu.Unlock()
			return idle, false, false
		}
		// Claim the waiter's role before asking: workers that find the queue empty while
		// the policy answers yield to this one instead of asking too.
		l.waiting = true
		active := l.active
		l.mu.Unlock()
		delay, stop := l.cfg.Backoff.Next(ctx, IdleState{Idle: idle, ActiveWorkers: active, PushEnabled: l.cfg.Push})
		delay = l.spreadAtCap(min(max(delay, l.cfg.MinIdle), l.cfg.MaxIdle))

		l.mu.Lock()
		if stop && l.canStopLocked() {
			l.waiting = false
			s.releaseLocked()
			l.mu.Unlock()
			return idle, false, false
		}
		l.mu.Unlock()

		if fb, ok := l.fallbackIn(); ok {
			delay = min(delay, fb) // the safety-net receive is due first
		}
		var woke bool
		if l.cfg.IdlePacer != nil {
			woke = l.pacedWait(ctx)
		} else {
			woke, _ = l.idleWait(ctx, delay, nil)
		}

		l.mu.Lock()
		l.waiting = false
		l.mu.Unlock()
		if ctx.Err() != nil {
			return idle, false, false
		}
		if woke || !l.cfg.Push {
			return idle, woke, true
		}
		if fb, ok := l.fallbackIn(); ok && fb <= 0 {
			return idle, false, true // the safety-net receive
		}
	}
}

// yieldLocked is called, with l.mu held, by a worker that found no work (or an error)
// while another worker already waits on the queue: it stops if MinWorkers allows,
// otherwise parks until a fan-out. It unlocks l.mu and returns false when the worker is to
// stop.
func (l *Listener) yieldLocked(ctx context.Context, s *workerSlot) bool {
	if l.active > l.cfg.MinWorkers {
		s.releaseLocked() // with the count it was decided on
		l.mu.Unlock()
		return false
	}
	l.parked++
	l.mu.Unlock()
	select {
	case <-l.unparkCh:
		return true // scaleUp already counted it as running
	case <-ctx.Done():
		l.mu.Lock()
		select {
		case <-l.unparkCh: // woken as ctx ended: scaleUp already took it off parked
		default:
			l.parked--
		}
		s.releaseLocked()
		l.mu.Unlock()
		return false
	}
}

// onError pauses after a failed receive. A single worker probes the queue, once per
// back-off interval or at the first sign of recovery (recovery.go); the others stop or
// park, so an outage costs one call per interval.
func (l *Listener) onError(ctx context.Context, s *workerSlot, delay time.Duration) bool {
	l.mu.Lock()
	if l.waiting {
		return l.yieldLocked(ctx, s)
	}
	l.waiting = true
	l.mu.Unlock()
	ok := l.backoff(ctx, delay)
	l.mu.Lock()
	l.waiting = false
	l.mu.Unlock()
	return ok
}

// fallbackIn is, with Push and a fallback poll, how long until the safety-net receive is due
// (PushFallbackPoll after the last receive); ok is false without one.
func (l *Listener) fallbackIn() (time.Duration, bool) {
	fb := l.cfg.PushFallbackPoll
	if !l.cfg.Push || fb <= 0 {
		return 0, false
	}
	return time.Duration(l.lastReceive.Load() + int64(fb) - time.Now().UnixNano()), true
}

// lease receives up to want messages, for which it holds want slots of the lease budget
// (it gives back those not filled), and counts the receive. sent is when it was sent: the
// leases run from then.
func (l *Listener) lease(ctx context.Context, want int) (msgs []*queue.Message, sent time.Time, err error) {
	sent = time.Now()
	l.lastReceive.Store(sent.UnixNano())
	msgs, err = l.receive(ctx, want)
	l.c.receives.Add(1)
	l.budget.put(want - len(msgs))
	if err == nil {
		l.noteLatency(time.Since(sent))
		if n := l.c.leasedIdle.Add(int64(len(msgs))); n > l.c.peakLeasedIdle.Load() {
			l.c.peakLeasedIdle.Store(n) // racy maximum: a display figure
		}
	}
	return msgs, sent, err
}

// work hands msgs, leased at leasedAt, to the handler through b (gathered into one call
// when batching) and settles them; it returns the messages a batch call left for the next.
func (l *Listener) work(ctx context.Context, b *batch, msgs []*queue.Message, leasedAt time.Time) (deferred []*queue.Message) {
	b.reset(msgs, leasedAt)
	if l.bh == nil {
		l.process(ctx, b, leasedAt)
		return nil
	}
	l.gather(ctx, b, leasedAt)
	l.process(ctx, b, leasedAt)
	return l.takeDeferred(b)
}

// receive leases up to want messages, leaving bodies above MaxMessageBytes in the store
// where the queue can.
func (l *Listener) receive(ctx context.Context, want int) ([]*queue.Message, error) {
	if bl, ok := queue.As[queue.BodyLimiter](l.q); ok && l.cfg.MaxMessageBytes > 0 && !l.cfg.AtMostOnce {
		return bl.ReceiveLimited(ctx, want, l.cfg.VisibilityTimeout, l.cfg.MaxMessageBytes)
	}
	return l.q.Receive(ctx, want, l.cfg.VisibilityTimeout)
}
