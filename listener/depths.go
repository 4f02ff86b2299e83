package listener

import (
	"context"
	"time"
)

// RefreshDepths reads the queue's depth (its split where the queue counts one) and the
// dead-letter queue's depth now, whatever their age, so that State shows them fresh: for a
// caller that just changed them behind the listener's back (a purge or redrive of dead
// letters through the admin API). Each read is a queue call counted in DepthQueries.
func (l *Listener) RefreshDepths(ctx context.Context) {
	l.depthAt.Store(0)
	l.refreshDepth(ctx)
	l.deadAt.Store(time.Now().UnixNano())
	l.c.depthQueries.Add(1)
	d, err := l.cfg.DeadLetter.Depth(ctx)
	if err != nil {
		l.c.deadDirty.Store(true) // read again on the next idle receive
		if ctx.Err() == nil {
			l.c.errorCalls.Add(1)
			l.log.Warn("dead-letter queue depth", "dead_letter", l.cfg.DeadLetter.Name(), "err", err)
		}
		return
	}
	l.c.deadDepth.Store(d)
}

// armDepthTimer keeps the depth fresh while the listener holds work: a worker that received
// messages arms a timer (unless one is armed) that reads the depth every l.depthEvery for as
// long as messages are leased or handled here, then disarms itself. Receives alone would
// not do: a binding at max_workers asks the scaler nothing more, and one whose handlers run
// long receives seldom, while the queue drains (other hosts) or fills behind it, so its
// depth, the autoscaler's signal, would stand still. An idle listener arms none: its depth
// is read by the empty receives (refreshIdleDepths).
func (l *Listener) armDepthTimer(ctx context.Context) {
	if l.depthTick.Load() || !l.depthTick.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(l.depthEvery, func() { l.depthTimer(ctx) })
}

// depthTimer is the armed timer's turn: it reads the depth and arms again while work is in
// hand, and disarms otherwise (the next receive that finds work arms it again). A read
// that takes long (a count over a store of millions of messages) spaces the next one out
// to depthCostFactor times its own length, up to depthSlowest, so that the reads cost about
// a tenth of a core whatever the backlog while the depth stays within a second of the
// store (wall time, which a busy machine stretches, must not stretch it further).
func (l *Listener) depthTimer(ctx context.Context) {
	if ctx.Err() != nil || l.budget.held() == 0 && l.c.inFlight.Load() == 0 {
		l.depthTick.Store(false)
		return
	}
	start := time.Now()
	l.refreshDepth(ctx)
	next := min(max(l.depthEvery, depthCostFactor*time.Since(start)), max(l.depthEvery, depthSlowest))
	time.AfterFunc(next, func() { l.depthTimer(ctx) })
}

// depthCostFactor spaces the depth timer's reads to this many times a read's length, up to
// depthSlowest apart (or depthEvery where that is longer: azure's billed reads).
const (
	depthCostFactor = 10
	depthSlowest    = 750 * time.Millisecond
)
