package listener

import (
	"context"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// An outage is counted once, and ended by the first sign of recovery.
//
// The workers of a binding fail together when their backend goes down: each had a receive
// in flight. Counting each failure would double the back-off once per worker, so that one
// outage of a binding with 16 workers starts at the cap (ErrorBackoffMax) and the queue
// stands still for a minute after the backend is back. The streak counts failed rounds
// instead: a failure counts only if its receive was sent after the streak last advanced,
// which is one failure per back-off interval (the one probe of onError).
//
// The back-off then ends early at any sign that the backend serves again: a receive that
// succeeded (any worker's), a Notify (a send went through), or the queue's own recoverer
// signal (listener/nats: a reconnect, a held pull that brought a message, or a probe of the
// consumer that was answered). Work resumes then, whatever the outage's length, instead of
// when the doubled interval runs out.

// recoverer is a queue that can tell when its backend serves again after failing.
type recoverer interface {
	// Recovered returns a channel closed at the next sign that the backend serves again.
	Recovered() <-chan struct{}
}

// recovererOf returns q's recoverer, looking through decorators (Unwrap), or nil.
func recovererOf(q queue.Queue) recoverer {
	for q != nil {
		if r, ok := q.(recoverer); ok {
			return r
		}
		u, ok := q.(interface{ Unwrap() queue.Queue })
		if !ok {
			return nil
		}
		q = u.Unwrap()
	}
	return nil
}

// countFailure counts a failed receive sent at sent: it advances the streak unless the
// streak advanced after the receive was sent (the failure belongs to a round already
// counted). It returns the streak and whether this failure advanced it.
func (l *Listener) countFailure(sent time.Time) (int64, bool) {
	last := l.errCounted.Load()
	if sent.UnixNano() <= last || !l.errCounted.CompareAndSwap(last, time.Now().UnixNano()) {
		return max(l.errStreak.Load(), 1), false
	}
	return l.errStreak.Add(1), true
}

// errDelay is the pause before the next call after n failed rounds: doubling from
// MinIdle, capped at ErrorBackoffMax.
func (l *Listener) errDelay(n int64) time.Duration {
	d := l.cfg.MinIdle
	for i := int64(1); i < n && d < l.cfg.ErrorBackoffMax; i++ {
		d *= 2
	}
	return min(d, l.cfg.ErrorBackoffMax)
}

// recovered ends the streak and wakes every sleeping back-off: a call succeeded.
func (l *Listener) recovered() {
	l.errStreak.Store(0)
	l.recovery.Fire()
}

// backoff sleeps d after a failed receive, or less: until a sign of recovery (recovered,
// Notify, the queue's recoverer). It reports false when ctx ended first.
func (l *Listener) backoff(ctx context.Context, d time.Duration) bool {
	woken := l.recovery.Chan()
	if l.errStreak.Load() == 0 {
		return ctx.Err() == nil // a call succeeded since this failure: no outage to wait out
	}
	var back <-chan struct{}
	if l.recov != nil {
		back = l.recov.Recovered()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-woken:
	case <-back:
	case <-l.notifyCh:
	}
	return ctx.Err() == nil
}
