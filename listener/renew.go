package listener

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// renewBeforeSettling renews b's leases once more if settlement would start inside the
// renewal margin: the deletes and dead letters still need the leases, and on a starved host
// the renewal timer may have fired late, so renewing beats racing the expiry.
func (l *Listener) renewBeforeSettling(b *batch) {
	if !l.cfg.AtMostOnce && time.Until(b.expires) < l.renewMargin() {
		l.renew(b)
	}
}

// renewFanout bounds the renewals of one batch in flight at once: one after another, the
// last of a large batch could land after its lease ran out on a slow store.
const renewFanout = 8

func (l *Listener) renew(b *batch) {
	if l.cfg.AtMostOnce {
		b.expires = b.expires.Add(l.cfg.VisibilityTimeout) // already deleted: nothing to keep
		return
	}
	if !b.renewed {
		b.leases = b.leases[:0]
		for _, m := range b.msgs {
			b.leases = append(b.leases, *m)
		}
		b.renewed = true
	}
	ctx := context.WithoutCancel(l.hctx)
	sent := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Bool
	sem := make(chan struct{}, renewFanout)
	for i := range b.leases {
		if st := b.st[i].Load(); st == stLost || st == stSettled {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			l.c.updates.Add(1)
			start := time.Now()
			err := l.renewLease(ctx, &b.leases[i])
			l.noteLatency(time.Since(start))
			switch {
			case err == nil:
			case errors.Is(err, queue.ErrLeaseLost):
				if b.lose(i) {
					l.leaseLost(b.msgs[i], "the renewal was refused: the lease had expired or been taken over", err)
				}
			default:
				failed.Store(true)
				l.c.errorCalls.Add(1)
				l.log.Warn("renew lease failed; retrying in a second while the lease lasts", "id", b.msgs[i].ID, "err", err)
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		// Some leases were not extended: keep their expiry and try again shortly (renewing
		// the others once more costs a call each, and never shortens a lease).
		b.renewPause = time.Second
		return
	}
	b.renewPause = 0
	b.expires = sent.Add(l.cfg.VisibilityTimeout)
}

// renewMargin is how long before a lease runs out the listener renews it: half the
// visibility timeout, or more when the queue is slow — ten times the slowest recent queue
// call — up to seven eighths of it.
func (l *Listener) renewMargin() time.Duration {
	vis := l.cfg.VisibilityTimeout
	return min(max(vis/2, 10*time.Duration(l.callLat.Load())), vis-vis/8)
}
