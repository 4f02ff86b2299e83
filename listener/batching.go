package listener

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wqhost/wqhost/internal/defaults"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// MaxBatchMessages is the most messages BatchConfig.MaxMessages may ask for in one call
// (AWS Lambda's SQS trigger allows as many).
const MaxBatchMessages = defaults.MaxBatchMessages // 10000

// BatchConfig makes a listener hand its handler many messages in one call. The listener
// gathers leased messages across receives (a receive returns at most MaxBatch) until one of
// the bounds is reached, renewing every lease while it gathers and while the call runs.
type BatchConfig struct {
	// MaxMessages is the most messages in one call, 2..MaxBatchMessages; 0 or 1 turns
	// batching off (one message per call).
	MaxMessages int
	// MaxWait is how long a batch may gather after its first message was received. 0 hands
	// over what the queue has at once: gathering stops at the first receive that finds
	// fewer messages than it asked for.
	MaxWait time.Duration
	// MaxBytes ends gathering once the batch's bodies hold this many bytes (the message
	// that crosses it stays in); 0: no limit.
	MaxBytes int64
}

// on reports whether batching is configured.
func (c BatchConfig) on() bool { return c.MaxMessages > 1 }

// BatchHandler handles many messages in one call. With Config.Batch on, the listener calls
// HandleBatch instead of Handle, and settles each message by its own outcome.
type BatchHandler interface {
	Handler
	// HandleBatch handles ms and sets outs[i], the outcome of ms[i]. outs arrives filled
	// with a failure, so a message the handler gives no outcome is retried, never deleted.
	HandleBatch(ctx context.Context, ms []*queue.Message, outs []outcome.Outcome)
}

// errNoVerdict is the failure of a message a BatchHandler left alone.
var errNoVerdict = errors.New("the batch handler set no verdict for this message")

// add appends msgs to the batch being gathered (no handler runs yet).
func (b *batch) add(msgs []*queue.Message) {
	n, k := len(b.msgs), len(msgs)
	b.msgs = append(b.msgs, msgs...)
	b.vs = append(b.vs, make([]outcome.Outcome, k)...)
	b.st = slices.Grow(b.st, k)[:n+k]
	for i := n; i < n+k; i++ {
		b.st[i].Store(stUnstarted)
	}
}

// adoptRenewed copies a renewal's new lease tokens into the messages while none is being
// handled, so the next renewal starts from them.
func (b *batch) adoptRenewed() {
	for i := range b.msgs {
		b.takeRenewedLease(i)
	}
	b.renewed = false
}

// admit takes b's messages from b.n on into the batch until a bound of bc is reached, and
// defers the rest to the next call; size is the bytes of the bodies admitted so far. It
// reports whether the batch is full.
func (b *batch) admit(size *int64, bc BatchConfig) bool {
	full := func() bool { return b.n >= bc.MaxMessages || bc.MaxBytes > 0 && *size >= bc.MaxBytes }
	for b.n < len(b.msgs) && !full() {
		*size += int64(len(b.msgs[b.n].Body))
		b.n++
	}
	for i := b.n; i < len(b.msgs); i++ {
		b.st[i].Store(stDeferred)
	}
	return full()
}

// takeDeferred returns b's deferred messages (leased past the bounds of the call just made,
// renewed with it) for the next call, and frees the lease budget of any of them whose lease
// was lost meanwhile.
func (l *Listener) takeDeferred(b *batch) []*queue.Message {
	var out []*queue.Message
	for i := b.n; i < len(b.msgs); i++ {
		if b.st[i].Load() == stDeferred {
			out = append(out, b.msgs[i])
			continue
		}
		l.budget.put(1) // lost: found and counted by the renewal
		l.c.leasedIdle.Add(-1)
	}
	return out
}

// releaseDeferred gives deferred messages back to the queue (the worker is stopping) and
// frees their lease budget.
func (l *Listener) releaseDeferred(ms []*queue.Message) {
	ctx := context.WithoutCancel(l.hctx)
	for _, m := range ms {
		l.putBack(ctx, m, true)
	}
	l.budget.put(len(ms))
	l.c.leasedIdle.Add(-int64(len(ms)))
}

// gather adds receives to b (which holds the first receive's messages, leased at firstAt)
// until it holds Batch.MaxMessages, Batch.MaxBytes of bodies, or Batch.MaxWait has passed.
// Messages a receive brings past a bound are deferred to the next call rather than
// released, which would count a delivery against them. It never waits for lease budget:
// when the budget is spent, the batch goes as it is.
func (l *Listener) gather(ctx context.Context, b *batch, firstAt time.Time) {
	bc := l.cfg.Batch
	deadline := firstAt.Add(bc.MaxWait)
	var size int64
	b.n = 0
	pause := l.cfg.MinIdle
	_, inOrder := l.q.(*orderedQueue)
	if b.admit(&size, bc) {
		return
	}
	for {
		if ctx.Err() != nil || l.stopping.Load() {
			return
		}
		if time.Until(b.expires) <= l.renewMargin() {
			l.renew(b)
			b.adoptRenewed()
		}
		want := l.budget.tryTake(min(l.cfg.BatchSize, bc.MaxMessages-b.n), l.gate)
		if want == 0 {
			return
		}
		msgs, _, err := l.lease(ctx, want)
		if err != nil {
			if ctx.Err() == nil {
				l.c.errorCalls.Add(1)
				l.log.Warn("receive while gathering a batch failed; the batch goes as it is", "messages", b.n, "err", err)
			}
			return
		}
		b.add(msgs)
		if b.admit(&size, bc) {
			return
		}
		if len(msgs) == want {
			continue // the queue may hold more right now
		}
		if len(msgs) == 0 {
			l.c.emptyReceives.Add(1)
		}
		// The queue had fewer than asked for. An ordered queue will not hand out more of
		// this group's successors while the batch holds the group, so waiting is useless.
		left := time.Until(deadline)
		if left <= 0 || inOrder {
			return
		}
		if !l.waitMore(ctx, min(left, max(time.Until(b.expires)-l.renewMargin(), 0)), &pause) {
			return
		}
	}
}

// waitMore waits up to d for more messages while a batch gathers: for a wake-up (Notify or
// a Waiter backend) when the listener gets them, otherwise for a poll interval that doubles
// from MinIdle. It reports false when ctx ended.
func (l *Listener) waitMore(ctx context.Context, d time.Duration, pause *time.Duration) bool {
	if l.waiter == nil && !l.cfg.Push {
		d = min(d, *pause)
		*pause = min(*pause*2, l.cfg.MaxIdle)
	}
	if d <= 0 {
		return ctx.Err() == nil
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if l.waiter != nil {
		// Wait returns on a write, on the timeout, or when ctx ends.
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = l.waiter.Wait(wctx, 0)
			cancel()
		}()
		defer func() { cancel(); <-done }()
	}
	select {
	case <-wctx.Done():
	case <-l.notifyCh:
	}
	return ctx.Err() == nil
}

// runBatch hands every startable message of b to the BatchHandler in one call.
func (b *batch) runBatch() {
	l := b.l
	defer func() {
		if b.left.Add(-1) == 0 {
			close(b.done)
		}
	}()
	b.idx, b.call = b.idx[:0], b.call[:0]
	for i := range b.msgs[:b.n] {
		l.c.leasedIdle.Add(-1)
		if b.vs[i].Err != nil {
			continue // settled before handling (over-dequeued, oversize, at-most-once delete failed)
		}
		if !b.st[i].CompareAndSwap(stUnstarted, stRunning) {
			continue // its lease was lost while the batch gathered
		}
		b.idx = append(b.idx, i)
		b.call = append(b.call, b.msgs[i])
	}
	b.next.Store(int32(b.n))
	if len(b.call) == 0 {
		return
	}
	vs := slices.Grow(b.callVs[:0], len(b.call))[:len(b.call)]
	b.callVs = vs
	l.handleBatch(b.call, vs)
	for k, i := range b.idx {
		b.vs[i] = vs[k]
		if b.st[i].CompareAndSwap(stRunning, stDone) && b.early.Load() {
			select {
			case b.progress <- struct{}{}:
			default:
			}
		}
	}
}

// handleBatch runs the BatchHandler on ms, unless the listener is shutting down, and leaves
// each message's outcome in vs.
func (l *Listener) handleBatch(ms []*queue.Message, vs []outcome.Outcome) {
	fill := func(v outcome.Outcome) {
		for i := range vs {
			vs[i] = v
		}
	}
	// One call takes one Limiter slot, however many messages it carries.
	if !l.enterCall() {
		fill(outcome.Failed(errUnstarted))
		return
	}
	defer l.leaveCall()
	fill(outcome.Failed(errNoVerdict))
	l.c.inFlight.Add(int64(len(ms)))
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			// As a guest's trap: the messages given a verdict keep it.
			v := outcome.Failed(fmt.Errorf("batch handler panicked on a batch of %d messages (first %s): %v", len(ms), ms[0].ID, r))
			for i := range vs {
				if vs[i].Err == errNoVerdict {
					vs[i] = v
				}
			}
		}
		l.hist.record(time.Since(start))
		l.c.inFlight.Add(-int64(len(ms)))
	}()
	l.bh.HandleBatch(l.hctx, ms, vs)
}
