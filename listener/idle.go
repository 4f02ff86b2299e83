package listener

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/wqhost/wqhost/internal/wait"
)

// waitForWork is supervise's wait, in its goroutine, while a listener that cannot doze
// (dormant.go) has no worker (with Push or an IdlePacer): until a wake-up (Notify, the
// queue's Watcher or Waiter, the earliest retry this listener scheduled becoming due), the
// push fallback poll, or the IdlePacer's grant. It reports false when ctx ended, and whether
// a wake-up (rather than a time-out or a grant) ended it: a receive made for a time-out that
// finds nothing is no spurious wake-up.
func (l *Listener) waitForWork(ctx context.Context) (ok, woken bool) {
	if l.cfg.IdlePacer != nil {
		woke := l.pacedWait(ctx)
		return ctx.Err() == nil, woke
	}
	for {
		l.mu.Lock()
		idle := l.active == 0
		l.mu.Unlock()
		if !idle {
			return true, false
		}
		// The safety net: without a wake-up, one receive per PushFallbackPoll.
		d, ok := l.fallbackIn()
		if ok && d <= 0 {
			return true, false
		}
		woke, timedOut := l.idleWait(ctx, d, nil)
		timedOut = timedOut && ok
		if ctx.Err() != nil {
			return false, false
		}
		if woke || timedOut {
			return true, woke
		}
	}
}

// idleWait sleeps up to d (d <= 0: until woken) unless woken earlier by Notify, the queue's
// Watcher or Waiter or, with push, a retry of ours falling due; a receive on grant ends it as
// a time-out does. It reports whether it was woken (rather than timing out), and false for
// both when ctx ended.
//
// Wake-ups that found nothing (a backend whose Wait fires spuriously, or a competing
// listener that took the message) must not become a loop: after k of them in a row,
// wake-ups are ignored for MinIdle·2^(k-1), up to MaxIdle.
func (l *Listener) idleWait(ctx context.Context, d time.Duration, grant <-chan struct{}) (woke bool, timedOut bool) {
	if k := l.spurious.Load(); k > 0 {
		quiet := l.quietSpell(k, time.Now())
		if d > 0 && quiet >= d {
			return false, l.sleep(ctx, d)
		}
		if !l.sleep(ctx, quiet) {
			return false, false
		}
		if d > 0 {
			d -= quiet
		}
	}
	if due := l.nextDue.Load(); due != 0 && l.cfg.Push {
		in := time.Duration(due - time.Now().UnixNano())
		if in <= 0 {
			l.nextDue.CompareAndSwap(due, 0)
			l.dueWake.Store(true)
			return true, false
		}
		if d <= 0 || in < d {
			defer func() {
				if timedOut {
					l.nextDue.CompareAndSwap(due, 0)
					l.dueWake.Store(true)
					woke, timedOut = true, false
				}
			}()
			d = in
		}
	}
	if l.watcher != nil {
		return l.watch(ctx, d, grant)
	}
	var waited chan struct{}
	if l.waiter != nil {
		// A queue that can only block: one goroutine for the wait, ended with it.
		wctx, cancel := context.WithCancel(ctx)
		waited = make(chan struct{})
		wdone := make(chan struct{})
		go func() {
			defer close(wdone)
			if l.waiter.Wait(wctx, 0) == nil {
				close(waited)
			}
		}()
		defer func() {
			cancel()
			<-wdone
		}()
	}
	select {
	case <-ctx.Done():
		return false, false
	case <-l.notifyCh:
		return true, false
	case <-waited:
		return true, false
	case <-wait.Timeout(d):
		return false, true
	case <-grant:
		return false, true
	}
}

// watch is idleWait's wait on a Watcher queue, in the caller's goroutine: one select on
// Notify, the queue's change channel, the grant, and one timer for d or the earliest
// invisible message becoming visible, whichever is first. A change that leaves no message
// visible (a retry released with a delay) is looked at again rather than reported: reported,
// it would make a receive that finds nothing, which counts as a spurious wake-up.
func (l *Listener) watch(ctx context.Context, d time.Duration, grant <-chan struct{}) (woke bool, timedOut bool) {
	var end time.Time
	if d > 0 {
		end = time.Now().Add(d)
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		changed, in, stop, err := l.watcher.Watch(ctx)
		if err != nil || in == 0 {
			stop()
			// A receive meets a Watch error (or ctx's end) as it does its own.
			return ctx.Err() == nil, false
		}
		next, limit := time.Duration(0), false // the timer's delay; whether it is d's
		if in > 0 {
			next = in + time.Millisecond
		}
		if !end.IsZero() {
			left := time.Until(end)
			if left <= 0 {
				stop()
				return false, true
			}
			if next == 0 || left <= next {
				next, limit = left, true
			}
		}
		var fired <-chan time.Time
		if next > 0 {
			if timer == nil {
				timer = time.NewTimer(next)
			} else {
				timer.Reset(next)
			}
			fired = timer.C
		}
		select {
		case <-ctx.Done():
		case <-l.notifyCh:
			woke = true
		case <-grant:
			timedOut = true
		case <-changed:
		case <-fired:
			timedOut = limit
		}
		stop()
		if woke || timedOut || ctx.Err() != nil {
			return woke, timedOut
		}
		// A write, or a message due to be visible by now: look again.
	}
}

// quietSpell is how long wake-ups are ignored after k in a row that found nothing:
// MinIdle·2^(k-1), up to MaxIdle, but never past a retry of ours falling due (noteDue, push
// only), which is work we know of, not a wake-up to distrust.
func (l *Listener) quietSpell(k int32, now time.Time) time.Duration {
	quiet := l.spreadAtCap(min(l.cfg.MinIdle<<min(k-1, 20), l.cfg.MaxIdle))
	if due := l.nextDue.Load(); due != 0 {
		quiet = max(min(quiet, time.Duration(due-now.UnixNano())), 0)
	}
	return quiet
}

// capSpread is the part of the idle range (MinIdle..MaxIdle) an idle wait at MaxIdle is
// drawn from: its top 10 %, as the built-in back-off's (plugins/builtin.CapJitter).
const capSpread = 0.1

// spreadAtCap draws an idle wait of exactly MaxIdle (a Backoff policy, a plugin's, that
// answers the maximum or more, or the quiet spell after spurious wake-ups at its
// maximum) from the top capSpread of the range, so that bindings idle together, on any
// backend, do not poll in step; any other wait is returned as it is.
func (l *Listener) spreadAtCap(d time.Duration) time.Duration {
	if d != l.cfg.MaxIdle || l.cfg.MaxIdle <= l.cfg.MinIdle {
		return d
	}
	return d - time.Duration(rand.Float64()*capSpread*float64(l.cfg.MaxIdle-l.cfg.MinIdle))
}

// pacedWait waits for the IdlePacer's grant of the next idle receive, or a wake-up as
// idleWait; it reports whether a wake-up (rather than the grant) ended it.
func (l *Listener) pacedWait(ctx context.Context) bool {
	p := l.cfg.IdlePacer
	defer p.Withdraw()
	woke, _ := l.idleWait(ctx, 0, p.Enrol())
	return woke
}

// sleep waits d; it reports false when ctx ended first.
func (l *Listener) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
