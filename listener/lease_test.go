package listener_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// loseRenewals fails every lease renewal with ErrLeaseLost, as a store does whose lease
// expired before the renewal landed (Azure's 404 or 400 PopReceiptMismatch).
type loseRenewals struct {
	queue.Queue
	mu      sync.Mutex
	renews  int
	deletes []string
}

func (q *loseRenewals) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	if d > 0 {
		q.mu.Lock()
		q.renews++
		q.mu.Unlock()
		return queue.ErrLeaseLost
	}
	return q.Queue.UpdateVisibility(ctx, m, d)
}

func (q *loseRenewals) Delete(ctx context.Context, m *queue.Message) error {
	q.mu.Lock()
	q.deletes = append(q.deletes, m.ID)
	q.mu.Unlock()
	return q.Queue.Delete(ctx, m)
}

// A renewal that reports the lease lost while a batch runs (here: a batch of 2 at
// concurrency 1, the first handler outliving half the lease) marks both messages lost from
// the renewing goroutine while the handler goroutine is about to pick up the second one.
// Under -race this was a data race on the batch's lost flags; now each message's state is one
// atomic word. A lost message is neither started nor settled: the running one is not
// deleted, the unstarted one is never handed to the handler.
func TestLeaseLostDuringBatchIsNotSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		q := &loseRenewals{Queue: e.q}
		cfg := baseConfig(q, e.dl)
		cfg.BatchSize, cfg.Concurrency, cfg.MaxWorkers = 2, 1, 1
		cfg.Scaler = fixedScaler(1)
		cfg.VisibilityTimeout = 30 * time.Second
		var mu sync.Mutex
		var handled []string
		cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
			mu.Lock()
			handled = append(handled, m.ID)
			mu.Unlock()
			time.Sleep(25 * time.Second) // past the renewal, within the lease
			return nil
		})
		ids := e.send(t, 2)
		l := start(t, cfg)
		waitFor(t, time.Second, 10*time.Minute, "both leases reported lost", func() bool {
			return l.State().LeasesLost >= 2
		})
		if err := l.stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(handled) != 1 || handled[0] != ids[0] {
			t.Errorf("handled %v, want only %s: %s's lease was lost before it could start", handled, ids[0], ids[1])
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		for _, id := range q.deletes {
			if id == ids[0] || id == ids[1] {
				t.Errorf("message %s deleted although its lease was lost", id)
			}
		}
	})
}

// With many workers and large batches but few handler slots (a binding with 16 workers,
// batches of 32 and a pool of 4 instances), the listener never holds more than
// HandlerSlots+Prefetch messages leased and unfinished, and never more than that minus the
// running ones leased idle, while every message is still processed exactly once.
func TestLeaseOnlyWhatCanStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.MaxWorkers, cfg.BatchSize, cfg.Concurrency = 16, 32, 4
		cfg.HandlerSlots, cfg.Prefetch = 4, 4
		cfg.Scaler = fixedScaler(16)
		running := make(chan struct{}, 4) // the pool: 4 calls at once
		var mu sync.Mutex
		seen := map[string]int{}
		maxLeased := 0
		cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
			running <- struct{}{}
			defer func() { <-running }()
			mu.Lock()
			seen[m.ID]++
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			return nil
		})
		const n = 500
		e.send(t, n)
		l := start(t, cfg)
		waitFor(t, 10*time.Millisecond, time.Hour, "all processed", func() bool {
			s := l.State()
			maxLeased = max(maxLeased, s.Leased)
			return s.Processed == n
		})
		s := l.State()
		if maxLeased > 8 || s.PeakLeasedIdle > 8 {
			t.Errorf("leased %d at most, %d leased idle at peak; want <= HandlerSlots+Prefetch = 8", maxLeased, s.PeakLeasedIdle)
		}
		t.Logf("leased at most %d, leased idle at peak %d (bound 8), %d receives for %d messages", maxLeased, s.PeakLeasedIdle, s.Receives, n)
		mu.Lock()
		defer mu.Unlock()
		for id, k := range seen {
			if k != 1 {
				t.Errorf("message %s handled %d times", id, k)
			}
		}
		if len(seen) != n {
			t.Errorf("%d messages handled, want %d", len(seen), n)
		}
	})
}

// verdictHandler returns outcome values.
type verdictHandler func(*queue.Message) outcome.Outcome

func (f verdictHandler) Handle(_ context.Context, m *queue.Message) outcome.Outcome {
	return f(m)
}

// A handler's verdict values reach the poison policy as they are, no error decoding: a
// retry keeps its delay, even one equal to the visibility timeout (which the ordered queue
// once mistook for a renewal), a reject is a reject, a failure carries its error, and OK
// deletes the message.
func TestVerdictsSettledAsValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		var mu sync.Mutex
		var seen []listener.Failure
		cfg.Poison = policyFunc(func(f listener.Failure) outcome.Outcome {
			mu.Lock()
			seen = append(seen, f)
			mu.Unlock()
			return outcome.Outcome{Kind: outcome.KindDrop}
		})
		verdicts := map[byte]outcome.Outcome{
			0: outcome.RetryAfter(listener.DefaultVisibilityTimeout, nil),
			1: outcome.Rejected(nil),
			2: outcome.Failed(context.DeadlineExceeded),
			3: outcome.Outcome{},
		}
		cfg.Handler = verdictHandler(func(m *queue.Message) outcome.Outcome { return verdicts[m.Body[0]] })
		e.send(t, 4)
		l := start(t, cfg)
		waitFor(t, time.Second, time.Hour, "all settled", func() bool {
			s := l.State()
			return s.Processed == 1 && s.Failed == 3
		})
		mu.Lock()
		defer mu.Unlock()
		for _, f := range seen {
			switch f.Message.Body[0] {
			case 0:
				if o := f.Outcome; o.Kind != outcome.KindRetry || o.After != listener.DefaultVisibilityTimeout {
					t.Errorf("retry outcome reached the policy as %s after %s", o.Kind, o.After)
				}
			case 1:
				if o := f.Outcome; o.Kind != outcome.KindReject || o.Reason() != "rejected" {
					t.Errorf("reject outcome reached the policy as %s, reason %q", o.Kind, o.Reason())
				}
			case 2:
				if o := f.Outcome; o.Kind != outcome.KindFailed || o.After != 0 || o.Err != context.DeadlineExceeded {
					t.Errorf("failed outcome reached the policy as %s after %s err %v", o.Kind, o.After, o.Err)
				}
			default:
				t.Errorf("OK verdict of message %s reached the poison policy", f.Message.ID)
			}
		}
	})
}

// slowRenewals makes every lease renewal take delay (a slow or distant store), failing it
// with ErrLeaseLost when the lease ran out before the renewal landed, as Azure does.
type slowRenewals struct {
	queue.Queue
	delay time.Duration
}

func (q *slowRenewals) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	if d > 0 {
		time.Sleep(q.delay)
		if time.Now().After(m.VisibleAt) {
			return queue.ErrLeaseLost
		}
	}
	return q.Queue.UpdateVisibility(ctx, m, d)
}

// A batch of 32 slow messages on a store whose renewals take 3s each: one after another,
// the last renewal would land 96s after the first, long after the 30s leases ran out (the
// issue's 404/PopReceiptMismatch on a slow emulator). Renewed concurrently, with a margin
// grown from the measured latency, no lease is lost and no message is handled twice.
func TestRenewalKeepsUpWithSlowStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		q := &slowRenewals{Queue: e.q, delay: 3 * time.Second}
		cfg := baseConfig(q, e.dl)
		cfg.BatchSize, cfg.Concurrency, cfg.MaxWorkers = 32, 32, 1
		cfg.Scaler = fixedScaler(1)
		handled, handler := countCalls(func(_ context.Context, m *queue.Message) error {
			time.Sleep(3 * time.Minute) // six visibility timeouts
			return nil
		})
		cfg.Handler = handler
		e.send(t, 32)
		l := start(t, cfg)
		waitFor(t, time.Millisecond, time.Minute, "the batch running", func() bool { return l.State().InFlight == 32 })
		// A second listener polls the same queue: it would take any lease that ran out.
		other := start(t, baseConfig(e.q, e.dl))
		waitFor(t, time.Second, time.Hour, "all processed", func() bool {
			return l.State().Processed+other.State().Processed >= 32
		})
		if s := l.State(); s.LeasesLost != 0 || other.State().Processed != 0 {
			t.Errorf("%d leases lost, %d messages taken by the other listener; want 0 and 0", s.LeasesLost, other.State().Processed)
		}
		handled.checkOnce(t)
	})
}

// failFirstRenewals fails the first renewal of every message with a store error (a 503),
// not a lost lease.
type failFirstRenewals struct {
	queue.Queue
	mu   sync.Mutex
	seen map[string]bool
}

func (q *failFirstRenewals) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	if d > 0 {
		q.mu.Lock()
		first := !q.seen[m.ID]
		q.seen[m.ID] = true
		q.mu.Unlock()
		if first {
			return errUnavailable
		}
	}
	return q.Queue.UpdateVisibility(ctx, m, d)
}

// A renewal that fails with a store error did not extend the lease: the listener tries
// again a second later, within the old lease, instead of waiting as if it had been renewed
// (which let the lease lapse and another listener take the message).
func TestFailedRenewalRetriedWithinLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		q := &failFirstRenewals{Queue: e.q, seen: map[string]bool{}}
		cfg := baseConfig(q, e.dl)
		cfg.BatchSize, cfg.MaxWorkers = 4, 1
		cfg.Scaler = fixedScaler(1)
		handled, handler := countCalls(func(_ context.Context, m *queue.Message) error {
			time.Sleep(2 * time.Minute)
			return nil
		})
		cfg.Handler = handler
		e.send(t, 4)
		l := start(t, cfg)
		waitFor(t, time.Millisecond, time.Minute, "the batch running", func() bool { return l.State().InFlight == 4 })
		other := start(t, baseConfig(e.q, e.dl))
		waitFor(t, time.Second, time.Hour, "all processed", func() bool {
			return l.State().Processed+other.State().Processed >= 4
		})
		if s := l.State(); s.LeasesLost != 0 || other.State().Processed != 0 || s.Errors == 0 {
			t.Errorf("leases lost %d, taken by the other listener %d, renewal errors %d; want 0, 0, > 0",
				s.LeasesLost, other.State().Processed, s.Errors)
		}
		handled.checkOnce(t)
	})
}

// slowSettleQueue refuses renewals while its handler runs (a failing store) and takes
// deleteTook for each delete (a slow one).
type slowSettleQueue struct {
	queue.Queue
	handlerDone atomic.Bool
	deleteTook  time.Duration
}

func (q *slowSettleQueue) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	if d > 0 && !q.handlerDone.Load() {
		return errUnavailable
	}
	return q.Queue.UpdateVisibility(ctx, m, d)
}

func (q *slowSettleQueue) Delete(ctx context.Context, m *queue.Message) error {
	time.Sleep(q.deleteTook)
	return q.Queue.Delete(ctx, m)
}

// A batch that finishes inside the renewal margin (its renewals failed, or their timer fired
// late on a starved host) is renewed once more before its deletes go out: a slow delete must
// not land after the lease ran out and leave the message to be handled again.
func TestLeaseRenewedBeforeSettlingInsideTheMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		q := &slowSettleQueue{Queue: e.q, deleteTook: 5 * time.Second}
		cfg := baseConfig(q, e.dl)
		cfg.VisibilityTimeout = 30 * time.Second
		cfg.BatchSize, cfg.MaxWorkers = 1, 1
		cfg.Scaler = fixedScaler(1)
		var handled atomic.Int32
		cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
			handled.Add(1)
			time.Sleep(28 * time.Second) // 2 s of the lease left when it returns
			q.handlerDone.Store(true)
			return nil
		})
		e.send(t, 1)
		l := start(t, cfg)
		waitFor(t, time.Second, 5*time.Minute, "the message processed", func() bool { return l.State().Processed == 1 })
		if s := l.State(); s.LeasesLost != 0 || handled.Load() != 1 {
			t.Errorf("leases lost %d, handled %d times; want 0 and 1", s.LeasesLost, handled.Load())
		}
	})
}
