package listener

import (
	"context"
	"sync/atomic"
	"time"
)

// An idle push listener (no worker, no IdlePacer) whose queue calls back on a write
// (FuncWatcher), or has no wake-up of its own, waits dormant: no goroutine is blocked for
// it. Its wake-ups are registered instead, each a callback: the queue's (WatchFunc), a timer
// (time.AfterFunc) for whichever is first of the push fallback poll, a retry of ours falling
// due and a delayed or leased message becoming visible, ctx's end (context.AfterFunc), and
// Notify, which finds the spell in l.dorm. The first to fire wins the spell's state word and
// starts a goroutine that cancels the others and looks again (doze): it starts a worker,
// shuts down, or goes dormant again. This is waitForWork without the goroutine, and decides
// as it does.

// A dormant spell's state: arming while doze registers its wake-ups, armed once they all
// are, then cancelled or the wake-up that fired.
const (
	arming int32 = iota
	armed
	cancelled
	wakeNotify
	wakeWrite
	wakeTimer
	wakeCtx
)

// dormant is one dormant spell of an idle listener.
type dormant struct {
	l     *Listener
	ctx   context.Context
	state atomic.Int32
	// quiet: the wait after spurious wake-ups, which only the timer and ctx end; a Notify
	// meanwhile leaves its token for the look that follows.
	quiet bool

	// Set while arming; read by whoever disarms, after the state word says armed.
	stopWatch func()
	timer     *time.Timer
	stopCtx   func() bool
}

// fire is every wake-up's callback: the first wins the spell. Fired while armed, it starts
// the goroutine that takes over; fired while arming, doze sees it when it tries to arm.
func (d *dormant) fire(why int32) {
	for {
		s := d.state.Load()
		if s != arming && s != armed {
			return // another wake-up won, or doze gave the spell up
		}
		if d.state.CompareAndSwap(s, why) {
			if s == armed {
				go d.l.resume(d)
			}
			return
		}
	}
}

// disarm cancels the spell's wake-ups (those not fired are never called) and unpublishes it.
func (d *dormant) disarm() {
	if d.stopWatch != nil {
		d.stopWatch()
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	if d.stopCtx != nil {
		d.stopCtx()
	}
	d.l.dorm.CompareAndSwap(d, nil)
}

// resume is the goroutine a wake-up of a dormant listener starts: it looks again and, unless
// that finds the listener dormant again, supervises.
func (l *Listener) resume(d *dormant) {
	d.disarm()
	if !l.doze(d.ctx) {
		l.supervise(d.ctx)
	}
}

// doze is supervise's wait once the last worker stopped, on a listener that can wait
// dormant. It reports true when the listener went dormant (the caller's goroutine is to
// end: a wake-up starts another); false once it started a worker, found one running, or ctx
// ended.
func (l *Listener) doze(ctx context.Context) (asleep bool) {
	for {
		if ctx.Err() != nil {
			return false
		}
		start, woken, asleep := l.arm(ctx)
		switch {
		case asleep:
			return true
		case start:
			l.quietUntil.Store(0)
			l.mu.Lock()
			if l.active == 0 {
				l.startLocked(ctx, true, woken)
			}
			l.mu.Unlock()
			return false
		case !woken:
			return false // a worker runs already
		}
		// A wake-up fired while arming: look again.
	}
}

// arm decides as waitForWork would: a worker to start now (start, and woken as idleWait
// reports it), the listener not idle any more (all false), or else registers the wake-ups
// of a dormant spell (asleep). When a wake-up fires before they are all registered, it
// reports woken alone: look again.
func (l *Listener) arm(ctx context.Context) (start, woken, asleep bool) {
	l.mu.Lock()
	idle := l.active == 0
	l.mu.Unlock()
	if !idle {
		return false, false, false
	}
	// The safety net: without a wake-up, one receive per PushFallbackPoll.
	fb, fbOK := l.fallbackIn()
	if fbOK && fb <= 0 {
		return true, false, false
	}
	wakeIn := time.Duration(-1) // the timer's delay; none while negative
	at := func(in time.Duration) {
		if wakeIn < 0 || in < wakeIn {
			wakeIn = in
		}
	}
	if fbOK {
		at(fb)
	}
	d := &dormant{l: l, ctx: ctx}
	now := time.Now()
	if k := l.spurious.Load(); k > 0 {
		// Wake-ups that found nothing must not become a loop (quietSpell).
		until := l.quietUntil.Load()
		if until == 0 {
			until = now.Add(l.quietSpell(k, now)).UnixNano()
			l.quietUntil.Store(until)
		}
		if in := time.Duration(until - now.UnixNano()); in > 0 {
			d.quiet = true
			at(in)
		}
	}
	if !d.quiet {
		if due := l.nextDue.Load(); due != 0 {
			in := time.Duration(due - now.UnixNano())
			if in <= 0 {
				l.nextDue.CompareAndSwap(due, 0)
				l.dueWake.Store(true)
				return true, true, false
			}
			at(in)
		}
	}
	l.dorm.Store(d) // published before the Notify token is looked for: see Notify
	if !d.quiet {
		select {
		case <-l.notifyCh:
			l.giveUp(d)
			return true, true, false
		default:
		}
		if l.fwatch != nil {
			// Registered before visibility is read (WatchFunc's contract): a write after the
			// read still calls back.
			in, stop, err := l.fwatch.WatchFunc(ctx, func() { d.fire(wakeWrite) })
			if err != nil || in == 0 {
				if err == nil {
					stop()
				}
				// A receive meets a watch error (or ctx's end) as it does its own.
				l.giveUp(d)
				return true, true, false
			}
			d.stopWatch = stop
			if in > 0 {
				at(in + time.Millisecond)
			}
		}
	}
	if wakeIn >= 0 {
		d.timer = time.AfterFunc(wakeIn, func() { d.fire(wakeTimer) })
	}
	d.stopCtx = context.AfterFunc(ctx, func() { d.fire(wakeCtx) })
	if d.state.CompareAndSwap(arming, armed) {
		return false, false, true
	}
	d.disarm()
	return false, true, false
}

// giveUp ends a spell that arm decided not to sleep: a wake-up that fires meanwhile is moot.
func (l *Listener) giveUp(d *dormant) {
	d.state.CompareAndSwap(arming, cancelled)
	d.disarm()
}
