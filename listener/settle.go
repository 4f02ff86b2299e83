package listener

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// Message states within a batch. Each message's state is one atomic word: the handler
// goroutine claims unstarted→running and running→done with compare-and-swap, and a renewal
// that learns the lease is gone stores lost whatever the state was, so a message is never
// both started and lost-before-start, and a lost message is never settled.
const (
	stUnstarted int32 = iota
	stRunning
	stDone
	stLost
	stSettled  // settled before the rest of its batch finished (see settleEarly)
	stDeferred // leased past a batch handler's bounds: kept, renewed, and handed to the next call
)

// batch is one received batch being processed. A worker reuses its batch (and the slices
// in it) for every receive, so the hot path allocates little beyond the messages.
type batch struct {
	l    *Listener
	msgs []*queue.Message
	// n is how many of msgs this batch handles; the ones after it are deferred (gather).
	n  int
	vs []outcome.Outcome // handler outcome per message; Err errUnstarted (or another marker) when it never ran
	st []atomic.Int32
	// leases holds renewed copies of the messages: renewal must not write the Message a
	// handler is reading. Settlement copies the tokens back once every handler returned.
	leases  []queue.Message
	renewed bool
	// expires is when the batch's leases run out, measured from before the request that
	// took or last renewed them (so the request's own latency is on the safe side).
	expires time.Time
	// renewPause is the least wait before the next renewal round: a second after a round in
	// which a renewal failed (not lost: a store error), so a failing store is not hammered.
	renewPause time.Duration
	dels       []*queue.Message
	delErrs    []error
	// settled is closed when the deletes of the last settle are done; nil when none are
	// outstanding. See awaitSettled.
	settled chan struct{}
	next    atomic.Int32
	left    atomic.Int32
	done    chan struct{}
	// early is set once the batch has run for tailAfter: from then on every finished
	// message is settled at once (progress wakes the worker), so that stragglers do not
	// hold the finished messages' lease budget. earlyN counts the messages settled so.
	early    atomic.Bool
	progress chan struct{}
	earlyN   int
	// A batch handler's call (batching.go): the indices of the messages it handles, those
	// messages and their outcomes, reused across batches.
	idx    []int
	call   []*queue.Message
	callVs []outcome.Outcome
}

// errSkip marks a message left alone: an at-most-once delete failed, so it is not handled
// and its lease expires.
var errSkip = errors.New("skipped")

func (b *batch) reset(msgs []*queue.Message, leasedAt time.Time) {
	n := len(msgs)
	b.msgs = msgs
	b.n = n
	if cap(b.vs) < n {
		b.vs = make([]outcome.Outcome, n, max(n, queue.MaxBatch))
		b.st = make([]atomic.Int32, n, max(n, queue.MaxBatch))
	}
	b.vs = b.vs[:n]
	b.st = b.st[:n]
	clear(b.vs)
	for i := range b.st {
		b.st[i].Store(stUnstarted)
	}
	b.renewed = false
	b.expires = leasedAt.Add(b.l.cfg.VisibilityTimeout)
	b.renewPause = 0
	b.next.Store(0)
	b.early.Store(false)
	b.earlyN = 0
	if b.progress == nil {
		b.progress = make(chan struct{}, 1)
	}
	select {
	case <-b.progress:
	default:
	}
}

// running returns the number of b's messages being handled now.
func (b *batch) running() int {
	n := 0
	for i := range b.st {
		if b.st[i].Load() == stRunning {
			n++
		}
	}
	return n
}

// takeRenewedLease copies message i's renewed lease (if the batch was renewed) into the
// message, for its settlement: renewal works on copies while handlers read the messages.
func (b *batch) takeRenewedLease(i int) {
	if b.renewed {
		b.msgs[i].LeaseToken = b.leases[i].LeaseToken
		b.msgs[i].VisibleAt = b.leases[i].VisibleAt
	}
}

// lose marks message i's lease lost; it reports whether it was not already.
func (b *batch) lose(i int) bool { return b.st[i].Swap(stLost) != stLost }

// process hands b's messages (b.reset, and gather with batching) to the handler (at most
// Concurrency calls at once, or one batch call), renews the leases while handlers run
// long, then settles every message. leasedAt is when the receive that leased the first
// message was sent.
func (l *Listener) process(ctx context.Context, b *batch, leasedAt time.Time) {
	msgs := b.msgs[:b.n]
	if l.cfg.AtMostOnce {
		l.deleteOnReceive(b)
	}
	// The one place a body's size is checked: no handler sees a body above the limit. A
	// message refused here is not dead-lettered here: like every failure it goes to the
	// poison policy (fail), as a reject.
	for i, m := range msgs {
		switch {
		case b.vs[i].Err != nil: // the at-most-once delete failed: not handled
		case !l.cfg.AtMostOnce && m.DequeueCount > l.cfg.MaxDequeueCount:
			// Its earlier leases expired unsettled (a hung or crashed handler): the poison
			// policy settles it unhandled, as a reject.
			b.vs[i] = refused("dequeue count %d exceeds max_dequeue_count %d: earlier leases expired unsettled",
				m.DequeueCount, l.cfg.MaxDequeueCount)
		case l.cfg.MaxMessageBytes > 0 && (m.Oversize > 0 || int64(len(m.Body)) > l.cfg.MaxMessageBytes):
			b.vs[i] = refused("message body of %d bytes exceeds max_message_bytes %d",
				max(m.Oversize, int64(len(m.Body))), l.cfg.MaxMessageBytes)
		case m.Oversize > 0:
			// The backend's own limit left it unread (a body an older store took): the
			// handler would see an empty body.
			b.vs[i] = refused("message body of %d bytes exceeds the backend's body limit", m.Oversize)
		}
	}
	b.left.Store(1)
	b.done = make(chan struct{})
	go b.run()
	l.awaitRenewing(ctx, b, min(l.cfg.Concurrency, len(msgs))-1, leasedAt)
	l.settle(ctx, b)
}

// spawnAfter is how long one goroutine works through a batch alone before helpers join it
// (up to Concurrency). Fast handlers finish a whole batch sooner: starting a goroutine per
// message would cost them more than the handler itself.
const spawnAfter = 100 * time.Microsecond

// spawn starts up to k more goroutines on b's unclaimed messages.
func (b *batch) spawn(k int) {
	for ; k > 0 && int(b.next.Load()) < len(b.msgs); k-- {
		if b.left.Add(1) == 1 {
			return // every runner already finished: the batch is done
		}
		go b.run()
	}
}

func (b *batch) run() {
	l := b.l
	if l.bh != nil {
		b.runBatch()
		return
	}
	var last time.Time // when the previous call ended: the next one's start, one clock read per call
	for {
		i := int(b.next.Add(1)) - 1
		if i >= len(b.msgs) {
			break
		}
		l.c.leasedIdle.Add(-1)
		if b.vs[i].Err != nil {
			continue // settled unhandled (refused: over-dequeued or oversize; or the at-most-once delete failed)
		}
		if !b.st[i].CompareAndSwap(stUnstarted, stRunning) {
			continue // its lease was lost before it started: someone else may hold it now
		}
		var v outcome.Outcome
		last, v = l.handle(b.msgs[i], last)
		b.vs[i] = v
		// The CAS fails when the lease was lost meanwhile.
		if b.st[i].CompareAndSwap(stRunning, stDone) && b.early.Load() {
			select {
			case b.progress <- struct{}{}:
			default: // a wake-up is pending already: it settles this one too
			}
		}
	}
	if b.left.Add(-1) == 0 {
		close(b.done)
	}
}

// handle runs the handler on one message, unless the listener is shutting down. start is
// when the call begins (zero: read the clock); it returns when the call ended.
func (l *Listener) handle(m *queue.Message, start time.Time) (end time.Time, v outcome.Outcome) {
	if !l.enterCall() {
		return time.Time{}, outcome.Failed(errUnstarted)
	}
	defer l.leaveCall()
	if l.cfg.Limiter != nil {
		start = time.Time{} // the wait for the limiter is not handler latency
	}
	l.c.inFlight.Add(1)
	if start.IsZero() {
		start = time.Now()
	}
	defer func() {
		if r := recover(); r != nil {
			v = outcome.Failed(fmt.Errorf("handler panicked on message %s: %v", m.ID, r))
		}
		end = time.Now()
		l.hist.record(end.Sub(start))
		l.c.inFlight.Add(-1)
	}()
	return time.Time{}, l.cfg.Handler.Handle(l.hctx, m)
}

// enterCall admits a handler call: false when the listener is stopping or the Limiter
// refused (ctx ended while waiting for it). A call admitted must leaveCall.
func (l *Listener) enterCall() bool {
	if l.stopping.Load() {
		return false
	}
	lim := l.cfg.Limiter
	if lim == nil {
		return true
	}
	if lim.Acquire(l.hctx) != nil {
		return false
	}
	if l.stopping.Load() {
		lim.Release()
		return false
	}
	return true
}

// leaveCall gives back the Limiter slot of an admitted call.
func (l *Listener) leaveCall() {
	if lim := l.cfg.Limiter; lim != nil {
		lim.Release()
	}
}

// tailAfter is how long a batch runs before its finished messages are settled one by one
// rather than all together when the last one finishes. Below it, one batched delete (one
// call, one commit) is worth the wait; above it, a slow message would hold the lease budget
// of every finished one (and so the next receive) until it ends: with one message in eight
// taking 40 ms, that cut throughput to a third.
const tailAfter = 10 * time.Millisecond

// awaitRenewing waits for the batch's handlers, starting up to helpers more goroutines if
// the batch takes longer than spawnAfter, and renewing every lease the batch still holds
// (unstarted, running, or handled and waiting for settlement) renewMargin before it runs
// out, so that a slow handler's messages are not delivered twice. A batch still running
// after tailAfter settles its finished messages as they finish and may start a worker to
// use the lease budget they free (see help).
func (l *Listener) awaitRenewing(ctx context.Context, b *batch, helpers int, leasedAt time.Time) {
	if helpers > 0 {
		t := time.NewTimer(spawnAfter)
		select {
		case <-b.done:
			t.Stop()
			return // fast path: nothing was renewed
		case <-t.C:
			b.spawn(helpers)
		}
	}
	tail := time.NewTimer(max(tailAfter-time.Since(leasedAt), 0))
	defer tail.Stop()
	tailC := tail.C
	for {
		t := time.NewTimer(max(time.Until(b.expires)-l.renewMargin(), b.renewPause))
		select {
		case <-b.done:
			t.Stop()
			l.renewBeforeSettling(b)
			for i := range b.msgs {
				b.takeRenewedLease(i)
			}
			return
		case <-t.C:
			l.renew(b)
		case <-tailC:
			t.Stop()
			tailC = nil
			b.early.Store(true)
			l.settleEarly(ctx, b)
			l.help(ctx, b)
		case <-b.progress:
			t.Stop()
			l.settleEarly(ctx, b)
			l.help(ctx, b)
		}
	}
}

// settleEarly settles the batch's finished messages while others still run, and gives
// their lease budget back. It runs on the worker's goroutine, as renew does, so a message
// is never renewed and settled at once.
func (l *Listener) settleEarly(ctx context.Context, b *batch) {
	l.renewBeforeSettling(b)
	sctx := context.WithoutCancel(ctx)
	var dels []*queue.Message
	n := 0
	for i := range b.msgs {
		if !b.st[i].CompareAndSwap(stDone, stSettled) {
			continue
		}
		n++
		b.takeRenewedLease(i)
		if l.settleOne(sctx, b.msgs[i], b.vs[i]) {
			dels = append(dels, b.msgs[i])
		}
	}
	b.earlyN += n
	l.budget.put(n - len(dels))
	if len(dels) > 0 {
		l.finishDeletes(sctx, dels, nil)
	}
}

// help starts one more worker when b's slow messages keep its worker from receiving while
// the worker has idle concurrency (every message of b started, some but fewer than
// Concurrency still running) and lease budget is free that no other worker will take:
// none is waiting for budget, none is the idle waiter (which a push or its back-off wakes
// for new work).
// It stands in for the worker's own next receive, the way Functions fetches a new batch when
// in-flight work drops below newBatchThreshold. The new worker starts as if idle: it asks
// the scaler when it finds work, and stops when it finds the queue empty.
func (l *Listener) help(ctx context.Context, b *batch) {
	if l.stopping.Load() || ctx.Err() != nil || l.taking.Load() > 0 || l.budget.free() < l.budget.min {
		return
	}
	if r := b.running(); int(b.next.Load()) < len(b.msgs) || r >= l.cfg.Concurrency || r == 0 {
		// The worker's concurrency is in use (not its stragglers' fault), or nothing runs
		// any more: the batch is ending and the worker receives next itself.
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting || l.active-l.parked >= l.cfg.MaxWorkers {
		return
	}
	if l.parked > 0 {
		l.parked--
		l.unparkCh <- struct{}{} // capacity MaxWorkers >= parked: never blocks
		return
	}
	l.c.helpers.Add(1)
	l.startLocked(ctx, true, false)
}

// noteLatency feeds one queue call's duration to the renewal margin: the estimate jumps to
// a slower call at once and decays by 1/16 per call after it.
func (l *Listener) noteLatency(d time.Duration) {
	for {
		cur := l.callLat.Load()
		next := max(int64(d), cur-cur/16)
		if next == cur || l.callLat.CompareAndSwap(cur, next) {
			return
		}
	}
}

// settle deletes the handled messages (in one call when the queue is a Batcher), releases
// the unstarted ones and hands failures to the poison policy.
func (l *Listener) settle(ctx context.Context, b *batch) {
	sctx := context.WithoutCancel(ctx) // settling must finish even during shutdown
	b.dels = b.dels[:0]
	for i, m := range b.msgs[:b.n] {
		if st := b.st[i].Load(); st == stLost || st == stSettled {
			continue // lost: logged and counted when found; settled: by settleEarly
		}
		if l.settleOne(sctx, m, b.vs[i]) {
			b.dels = append(b.dels, m)
		}
	}
	// A message's lease-budget slot is freed once it is settled: a message waiting for its
	// delete is still leased, and would be handled twice if the host died now.
	l.budget.put(b.n - len(b.dels) - b.earlyN)
	if len(b.dels) > 0 {
		// The deletes go out while the worker receives its next batch, so that the two calls
		// share one round trip (on the local store: one group commit, one fsync) instead of
		// taking one each. The worker waits for them (awaitSettled) before it reuses b or
		// stops; a message counts as processed once its delete is done.
		done := make(chan struct{})
		b.settled = done
		go func() {
			defer close(done)
			b.delErrs = l.finishDeletes(sctx, b.dels, b.delErrs)
		}()
	}
}

// settleOne settles one message by its outcome, except a successful one under
// at-least-once, which it reports for a (batched) delete.
func (l *Listener) settleOne(ctx context.Context, m *queue.Message, v outcome.Outcome) (del bool) {
	switch err := v.Err; {
	case v.Kind == outcome.KindDone:
		if !l.cfg.AtMostOnce {
			return true
		}
		l.c.processed.Add(1)
	case err == errSkip:
	case err == errUnstarted:
		l.putBack(ctx, m, true)
	case v.Kind == outcome.KindFailed && l.hctx.Err() != nil && errors.Is(err, context.Canceled):
		// Cut off by the end of the shutdown grace: not the message's fault, but its
		// handler ran, so the delivery counts.
		l.putBack(ctx, m, false)
	default:
		l.fail(ctx, m, v)
	}
	return false
}

// awaitSettled waits for the deletes the last settle of b left running.
func (b *batch) awaitSettled() {
	if b.settled != nil {
		<-b.settled
		b.settled = nil
	}
}

// finishDeletes deletes the handled messages dels, gives their lease budget back and
// accounts for the outcome. It returns the errors in errs' storage.
func (l *Listener) finishDeletes(ctx context.Context, dels []*queue.Message, errs []error) []error {
	errs = l.deleteMany(ctx, dels, errs)
	l.budget.put(len(dels))
	var ok uint64
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		if errors.Is(err, queue.ErrLeaseLost) {
			l.leaseLost(dels[i], "the delete after a successful handler call was refused", err)
		} else {
			l.c.errorCalls.Add(1)
			l.log.Error("delete processed message; it will be redelivered", "id", dels[i].ID, "err", err)
		}
	}
	l.c.processed.Add(ok)
	return errs
}

// deleteMany deletes ms (one call with a Batcher) and returns one error per message, in
// errs' storage.
func (l *Listener) deleteMany(ctx context.Context, ms []*queue.Message, errs []error) []error {
	l.c.deletes.Add(uint64(len(ms)))
	if l.batcher != nil {
		return l.batcher.DeleteBatch(ctx, ms)
	}
	errs = errs[:0]
	for _, m := range ms {
		errs = append(errs, l.q.Delete(ctx, m))
	}
	return errs
}

// deleteOnReceive implements at-most-once: the batch is deleted before any handler runs;
// a message that could not be deleted is not handled (another receiver may get it).
func (l *Listener) deleteOnReceive(b *batch) {
	ctx := context.WithoutCancel(l.hctx)
	errs := l.deleteMany(ctx, b.msgs[:b.n], b.delErrs)
	for i, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, queue.ErrLeaseLost) {
			b.st[i].Store(stLost)
			l.leaseLost(b.msgs[i], "the at-most-once delete on receive was refused", err)
		} else {
			b.vs[i] = outcome.Failed(errSkip)
			l.c.errorCalls.Add(1)
			l.log.Error("at-most-once delete on receive; message not handled", "id", b.msgs[i].ID, "err", err)
		}
	}
	if l.batcher == nil {
		b.delErrs = errs
	}
}

// leaseLost reports a message this listener no longer holds: why says which operation
// found out. The message is not settled by this listener; the queue makes it visible again
// when the lease runs out (or already has), and whoever receives it next, this host
// included, handles it again with a higher dequeue count.
func (l *Listener) leaseLost(m *queue.Message, why string, err error) {
	l.c.leasesLost.Add(1)
	l.log.Warn("lease lost: message not settled by this listener; the queue redelivers it and it will be handled again",
		"id", m.ID, "dequeue_count", m.DequeueCount, "why", why, "err", err)
}

// putBack returns a message that was never handled: released to the head of its queue, or
// sent again under at-most-once (it was deleted on receive). unstarted says its handler
// never began: the release then keeps its dequeue count where the queue can (Releaser).
func (l *Listener) putBack(ctx context.Context, m *queue.Message, unstarted bool) {
	if l.cfg.AtMostOnce {
		l.c.sends.Add(1)
		if _, err := l.q.Send(ctx, m.Body, queue.SendOptions{Attributes: m.Attributes}); err != nil {
			l.c.errorCalls.Add(1)
			l.log.Error("re-send unstarted message at shutdown; it is lost", "id", m.ID, "err", err)
		}
		return
	}
	l.c.updates.Add(1)
	if unstarted {
		l.c.released.Add(1)
	}
	if err := l.releaseLease(ctx, m, unstarted); err != nil {
		if errors.Is(err, queue.ErrLeaseLost) {
			return // it is visible again already
		}
		l.c.errorCalls.Add(1)
		l.log.Warn("release unstarted message; it returns when its lease expires", "id", m.ID, "err", err)
	}
}
