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
