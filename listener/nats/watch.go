package nats

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/listener/queue"
)

// An idle queue waits with one held pull request: a Fetch of one message that the server
// answers the moment a message is published (by any host), released or due for a retry, and
// otherwise only after PullHold. The message it brings is kept (leased) until the next
// Receive. So an idle host sends one request per PullHold and nothing else, and a new message
// starts at once. The pull runs while a watch is open and ends with its Fetch after the last
// watch stops: it is never cancelled, because the server would deliver into a cancelled pull
// a message nobody receives until its AckWait runs out.

type heldMsg struct {
	msg delivery
	at  time.Time // when it arrived: its AckWait began a moment before
}

// takeHeld leases up to max of the messages held pulls brought, dropping those whose lease
// may have run out meanwhile (the server redelivers them).
func (q *Queue) takeHeld(max int, visibility time.Duration) []*queue.Message {
	q.mu.Lock()
	n := min(max, len(q.held))
	take := append([]heldMsg(nil), q.held[:n]...)
	q.held = q.held[n:]
	q.mu.Unlock()
	var out []*queue.Message
	for _, h := range take {
		if time.Since(h.at) > q.b.opts.AckWait*3/4 {
			continue // its lease may run out before the receive renews it: the server redelivers it
		}
		if m := q.admit(h.msg, h.at, visibility, true); m != nil {
			out = append(out, m)
		}
	}
	return out
}

// noteWrite records a local write that may have made a message visible and wakes the waiters.
func (q *Queue) noteWrite() {
	q.mu.Lock()
	q.hint = true
	q.hintGen++
	q.mu.Unlock()
	q.wake.Fire()
}

// noteDue records when a delayed message this process knows of falls due.
func (q *Queue) noteDue(t time.Time) {
	q.mu.Lock()
	if q.due.IsZero() || t.Before(q.due) || !time.Now().Before(q.due) {
		q.due = t
	}
	q.mu.Unlock()
}

// visibleInLocked: 0 when a held pull brought a message or a local write may have made one
// visible, the time until the earliest delayed message this process knows of, else -1 (the
// held pull wakes the watch).
func (q *Queue) visibleInLocked() time.Duration {
	if len(q.held) > 0 || q.hint || q.groupHint {
		return 0
	}
	if !q.due.IsZero() {
		if d := time.Until(q.due); d > 0 {
			return d
		}
		q.due = time.Time{}
	}
	return -1
}

// watchLocked opens a watch: it starts the held pull if none runs.
func (q *Queue) watchLocked() (stop func()) {
	q.watchers++
	if !q.pulling && !q.closing {
		q.pulling = true
		if q.ordered {
			q.subscribeGroupsLocked()
		}
		ctx, cancel := context.WithCancel(context.Background())
		q.stopPull = cancel
		go q.pull(ctx)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			q.watchers--
			q.mu.Unlock()
		})
	}
}

// Watch implements queue.Watcher: the channel is closed when a held pull brings a message
// and by a local send or release.
func (q *Queue) Watch(context.Context) (changed <-chan struct{}, visibleIn time.Duration, stop func(), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ch := q.wake.Chan()
	stop = q.watchLocked()
	return ch, q.visibleInLocked(), stop, nil
}

// WatchFunc implements queue.FuncWatcher: fn runs when a held pull brings a message (in
// the pull's goroutine) or by a local send or release (in the writer's).
func (q *Queue) WatchFunc(_ context.Context, fn func()) (visibleIn time.Duration, stop func(), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	stopFn := q.wake.Func(fn)
	stopWatch := q.watchLocked()
	return q.visibleInLocked(), func() { stopFn(); stopWatch() }, nil
}

// Wait implements queue.Waiter.
func (q *Queue) Wait(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err // no watch, and so no held pull, for a caller already gone
	}
	return queue.WaitWatching(ctx, q, d)
}

// pull holds one pull request at a time while a watch is open.
func (q *Queue) pull(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		q.mu.Lock()
		if q.watchers <= 0 || q.closing {
			q.endPullLocked()
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.pulls.Add(1)
		fctx, cancel := context.WithTimeout(ctx, q.b.opts.PullHold)
		q.mu.Lock()
		q.cancelHeld = cancel
		q.mu.Unlock()
		batch, err := q.cons.Fetch(1, jetstream.FetchContext(fctx), jetstream.FetchHeartbeat(q.b.opts.PullHeartbeat))
		if err == nil {
			for msg := range batch.Messages() {
				d, derr := fromJS(msg)
				if derr != nil {
					q.b.log.Error("nats: delivery without metadata; given back", "queue", q.name, "err", derr)
					_ = q.ack(msg.Reply(), ackNak)
					continue
				}
				q.hold(d)
			}
			err = batch.Error()
		}
		cancel()
		rearmed := fctx.Err() == context.Canceled && ctx.Err() == nil
		if ctx.Err() != nil {
			q.mu.Lock()
			q.endPullLocked()
			q.mu.Unlock()
			return
		}
		if err == nil || rearmed || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoMessages) {
			backoff = 100 * time.Millisecond
			continue
		}
		// A lost server or leader: wake the waiters so a receive meets the error, and retry.
		q.b.log.Warn("nats: held pull", "queue", q.name, "err", err, "retry_in", backoff)
		q.wake.Fire()
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// hold keeps a message a held pull brought for the next Receive and wakes the waiters; a
// delayed or expired one is dealt with at once.
func (q *Queue) hold(msg delivery) {
	h := msg.Headers()
	now := time.Now()
	if exp, ok := unixHeader(h, hdrExpires); ok && !now.Before(exp) {
		_ = q.ack(msg.Reply(), ackAck)
		return
	}
	if nb, ok := unixHeader(h, hdrNotBefore); ok && now.Before(nb) {
		_ = q.ack(msg.Reply(), nakDelay(nb.Sub(now)))
		q.noteDue(nb)
		if msg.received == 1 {
			q.sentBack(msg.seq, nb)
		}
		return
	}
	q.mu.Lock()
	if q.closing {
		q.mu.Unlock()
		_ = q.ack(msg.Reply(), ackNak)
		return
	}
	q.held = append(q.held, heldMsg{msg: msg, at: now})
	q.mu.Unlock()
	q.wake.Fire()
	q.recov.Fire() // the consumer delivers: the queue is served
}

// reconnected re-arms the held pull after the connection moved to another server: the pull
// request died with the old connection (the server would otherwise be noticed gone only
// after two missed heartbeats), and wakes the waiters so they receive at once.
func (q *Queue) reconnected() {
	q.mu.Lock()
	if q.cancelHeld != nil {
		q.cancelHeld()
	}
	q.mu.Unlock()
	q.wake.Fire()
	q.recov.Fire()
}

// close gives back the held messages and ends the held pull.
func (q *Queue) close() {
	q.mu.Lock()
	if !q.closing {
		close(q.quit)
	}
	q.closing = true
	held := q.held
	q.held = nil
	if q.stopPull != nil {
		q.stopPull()
	}
	q.mu.Unlock()
	for _, h := range held {
		_ = q.ack(h.msg.Reply(), ackNak)
	}
	q.wake.Fire()
}
