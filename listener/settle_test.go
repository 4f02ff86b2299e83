package listener_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// A message that always fails is retried until its dequeue count reaches MaxDequeueCount,
// then moved to the dead-letter queue with its reason and metadata, its own attributes kept.
func TestPoisonAfterMaxDequeueCount(t *testing.T) {
	for _, tt := range []struct {
		name      string
		max       int
		err       error
		wantCalls int
		reason    string
	}{
		{"max 1", 1, errors.New("boom"), 1, "boom"},
		{"max 3", 3, errors.New("boom"), 3, "failed 3 times"},
		{"default 5", 0, errors.New("bad input"), 5, "bad input"},
		{"reject skips retries", 5, outcome.Reject(errors.New("malformed")), 1, "malformed"},
		{"retry-after still counts", 3, outcome.Retry(time.Minute, errors.New("later")), 3, "later"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.MaxDequeueCount = tt.max
				cfg.HandlerVersion = func() string { return "sha256:abc" }
				var calls atomic.Int32
				cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
					calls.Add(1)
					return tt.err
				})
				id, err := e.q.Send(context.Background(), []byte("payload"), queue.SendOptions{Attributes: map[string]string{"tenant": "acme"}})
				if err != nil {
					t.Fatal(err)
				}
				l := start(t, cfg)
				sent := time.Now()
				waitFor(t, time.Second, 24*time.Hour, "dead-letter", func() bool { return l.State().Poisoned == 1 })
				time.Sleep(time.Hour) // nothing more happens to it
				synctest.Wait()
				if got := int(calls.Load()); got != tt.wantCalls {
					t.Errorf("handler ran %d times, want %d", got, tt.wantCalls)
				}
				if d, _ := e.q.Depth(context.Background()); d != 0 {
					t.Errorf("%d messages left in the work queue, want 0", d)
				}
				ms, err := e.dl.Receive(context.Background(), 10, time.Minute)
				if err != nil || len(ms) != 1 {
					t.Fatalf("dead-letter queue holds %d messages (%v), want 1", len(ms), err)
				}
				m := ms[0]
				want := map[string]string{
					"tenant":                 "acme",
					queue.AttrOriginalID:     id,
					queue.AttrOriginalQueue:  "work",
					queue.AttrDequeueCount:   strconv.Itoa(tt.wantCalls),
					queue.AttrHandlerVersion: "sha256:abc",
				}
				for k, v := range want {
					if m.Attributes[k] != v {
						t.Errorf("dead letter attribute %s = %q, want %q", k, m.Attributes[k], v)
					}
				}
				if r := m.Attributes[queue.AttrReason]; !strings.Contains(r, tt.reason) {
					t.Errorf("reason %q does not mention %q", r, tt.reason)
				}
				at, err := time.Parse(time.RFC3339Nano, m.Attributes[queue.AttrDeadLetteredAt])
				if err != nil || at.Before(sent) || at.After(time.Now()) {
					t.Errorf("dead-lettered-at %q (%v) is not a time since the send", m.Attributes[queue.AttrDeadLetteredAt], err)
				}
				if string(m.Body) != "payload" {
					t.Errorf("dead letter body %q, want the original", m.Body)
				}
				s := l.State()
				if s.Failed != uint64(tt.wantCalls) || s.Retried != uint64(tt.wantCalls-1) || s.Processed != 0 {
					t.Errorf("failed %d, retried %d, processed %d; want %d, %d, 0", s.Failed, s.Retried, s.Processed, tt.wantCalls, tt.wantCalls-1)
				}
			})
		})
	}
}

// The poison policy sees the handler's retry-after and reject requests.
func TestFailurePassedToPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.MaxDequeueCount = 7
		var mu sync.Mutex
		var seen []listener.Failure
		cfg.Poison = policyFunc(func(f listener.Failure) outcome.Outcome {
			mu.Lock()
			seen = append(seen, f)
			mu.Unlock()
			return outcome.Outcome{Kind: outcome.KindDrop}
		})
		errs := map[string]error{
			"\x00": outcome.Retry(42*time.Second, errors.New("busy")),
			"\x01": outcome.Reject(errors.New("bad")),
			"\x02": fmt.Errorf("wrapped: %w", outcome.Retry(3*time.Second, nil)),
		}
		cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
			return errs[string(m.Body[:1])]
		})
		for k := range errs {
			e.q.Send(context.Background(), []byte(k), queue.SendOptions{})
		}
		l := start(t, cfg)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 3 {
			t.Fatalf("policy asked %d times, want 3", len(seen))
		}
		for _, f := range seen {
			want := map[string]outcome.Outcome{"\x00": {Kind: outcome.KindRetry, After: 42 * time.Second},
				"\x01": {Kind: outcome.KindReject},
				"\x02": {Kind: outcome.KindRetry, After: 3 * time.Second}}[string(f.Message.Body[:1])]
			if o := f.Outcome; o.Kind != want.Kind || o.After != want.After || f.MaxDequeueCount != 7 || o.Reason() == "" {
				t.Errorf("failure of %q: %s after %s max %d reason %q; want %s after %s max 7 and a reason",
					f.Message.Body, o.Kind, o.After, f.MaxDequeueCount, o.Reason(), want.Kind, want.After)
			}
		}
		if d, _ := e.q.Depth(context.Background()); d != 0 || l.State().Poisoned != 0 {
			t.Errorf("dropped messages: depth %d, poisoned %d; want 0, 0", d, l.State().Poisoned)
		}
	})
}

type policyFunc func(listener.Failure) outcome.Outcome

func (f policyFunc) Decide(_ context.Context, fl listener.Failure) outcome.Outcome { return f(fl) }

// A handler running for many visibility timeouts keeps its lease: the message is neither
// delivered a second time nor lost, and it is deleted once the handler succeeds.
func TestLeaseRenewalPreventsRedelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.VisibilityTimeout = 30 * time.Second
		cfg.BatchSize = 1
		cfg.Scaler = fixedScaler(4) // idle workers around that would take a lost lease
		deliveries, handler := countCalls(func(_ context.Context, m *queue.Message) error {
			if m.Body[0] == 0 {
				time.Sleep(5 * time.Minute) // ten visibility timeouts
			}
			return nil
		})
		cfg.Handler = handler
		e.send(t, 5)
		l := start(t, cfg)
		// A second listener on the same queue polls too: it would get the message the
		// moment its lease lapsed.
		ocfg := baseConfig(e.q, e.dl)
		ocfg.Handler = cfg.Handler
		other := start(t, ocfg)
		waitFor(t, time.Second, time.Hour, "all processed", func() bool {
			return l.State().Processed+other.State().Processed == 5
		})
		deliveries.checkOnce(t)
		s, o := l.State(), other.State()
		if u, lost := s.Updates+o.Updates, s.LeasesLost+o.LeasesLost; u < 9 || lost != 0 {
			t.Errorf("%d visibility updates, %d leases lost; want >= 9 renewals for 5 minutes at 15s, 0 lost", u, lost)
		}
	})
}

// Shutdown stops receiving, lets the in-flight handler finish within the grace period
// (deleting its message) and releases the batch's unstarted messages at once.
func TestShutdownReleasesUnstarted(t *testing.T) {
	for _, tt := range []struct {
		name    string
		work    time.Duration // the in-flight handler's run time
		grace   time.Duration
		wantErr bool
		left    int // messages visible right after Run returns
	}{
		{"in-flight finishes", 5 * time.Second, 30 * time.Second, false, 9},
		{"grace exceeded", time.Hour, 10 * time.Second, true, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.BatchSize, cfg.Concurrency, cfg.MaxWorkers = 10, 1, 1
				cfg.ShutdownGrace = tt.grace
				started := make(chan struct{}, 10)
				cfg.Handler = listener.HandlerFunc(func(ctx context.Context, m *queue.Message) error {
					started <- struct{}{}
					select {
					case <-time.After(tt.work):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				e.send(t, 10)
				l := start(t, cfg)
				<-started
				t0 := time.Now()
				err := l.stop()
				if (err != nil) != tt.wantErr {
					t.Fatalf("Run returned %v, want error %v", err, tt.wantErr)
				}
				if took := time.Since(t0); took > min(tt.work, tt.grace) {
					t.Errorf("shutdown took %s, want at most %s", took, min(tt.work, tt.grace))
				}
				if len(started) != 0 {
					t.Errorf("%d more handlers started after shutdown began", len(started))
				}
				// Released messages are visible now, not after the 30s lease.
				ms, err := e.q.Receive(context.Background(), 32, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				if len(ms) != tt.left {
					t.Errorf("%d messages receivable right after shutdown, want %d", len(ms), tt.left)
				}
				if p := l.State().Processed; int(p) != 10-tt.left {
					t.Errorf("processed %d, want %d", p, 10-tt.left)
				}
			})
		})
	}
}

// A delete that finds the lease lost is counted and logged, not counted as processed; the
// message comes back and is processed (and counted) once.
func TestLeaseLostCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		spy := &spyQueue{Queue: e.q}
		spy.loseDeletes.Store(1)
		cfg := baseConfig(spy, e.dl)
		cfg.VisibilityTimeout = 30 * time.Second
		var runs atomic.Int32
		cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
			runs.Add(1)
			return nil
		})
		e.send(t, 1)
		l := start(t, cfg)
		synctest.Wait()
		if s := l.State(); s.Processed != 0 || s.LeasesLost != 1 {
			t.Fatalf("after a lost lease: processed %d, lost %d; want 0, 1", s.Processed, s.LeasesLost)
		}
		waitFor(t, time.Second, 10*time.Minute, "redelivery", func() bool { return l.State().Processed == 1 })
		time.Sleep(10 * time.Minute)
		if s := l.State(); s.Processed != 1 || s.LeasesLost != 1 || runs.Load() != 2 {
			t.Errorf("processed %d, lost %d, handler runs %d; want 1, 1, 2", s.Processed, s.LeasesLost, runs.Load())
		}
	})
}

// At-most-once deletes each message before handling it: a failure is never retried, it is
// dead-lettered instead (kept, not lost).
func TestAtMostOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.AtMostOnce = true
		runs, handler := countCalls(func(ctx context.Context, m *queue.Message) error {
			if d, _ := e.q.Depth(ctx); d != 0 {
				return fmt.Errorf("message %s still in the queue while handled (depth %d)", m.ID, d)
			}
			if m.Body[0]%2 == 1 {
				return errors.New("odd")
			}
			return nil
		})
		cfg.Handler = handler
		e.send(t, 10)
		l := start(t, cfg)
		time.Sleep(time.Hour)
		synctest.Wait()
		s := l.State()
		if s.Processed != 5 || s.Poisoned != 5 || s.Retried != 0 {
			t.Errorf("processed %d, poisoned %d, retried %d; want 5, 5, 0", s.Processed, s.Poisoned, s.Retried)
		}
		if n := runs.checkOnce(t); n != 10 {
			t.Errorf("%d messages handled, want 10", n)
		}
	})
}

// One worker runs up to Concurrency handler calls of its batch at once, and no more.
func TestConcurrencyWithinBatch(t *testing.T) {
	for _, tt := range []struct{ batch, conc, want int }{
		{10, 4, 4},
		{10, 1, 1},
		{3, 8, 3},
		{32, 0, 32}, // default: BatchSize
	} {
		t.Run(fmt.Sprintf("batch%d-conc%d", tt.batch, tt.conc), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.MaxWorkers, cfg.BatchSize, cfg.Concurrency = 1, tt.batch, tt.conc
				cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
					time.Sleep(time.Second)
					return nil
				})
				e.send(t, 100)
				l := start(t, cfg)
				time.Sleep(time.Millisecond) // past the single-goroutine fast path
				synctest.Wait()
				if got := l.State().InFlight; got != tt.want {
					t.Errorf("%d handler calls in flight, want %d", got, tt.want)
				}
			})
		})
	}
}

// A panicking handler fails its message like an error would; the listener survives.
func TestHandlerPanicIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.MaxDequeueCount = 2
		cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
			if m.Body[0] == 0 {
				panic("nil map")
			}
			return nil
		})
		e.send(t, 3)
		l := start(t, cfg)
		waitFor(t, time.Second, time.Hour, "settled", func() bool { s := l.State(); return s.Processed == 2 && s.Poisoned == 1 })
		ms, _ := e.dl.Receive(context.Background(), 1, time.Minute)
		if len(ms) != 1 || !strings.Contains(ms[0].Attributes[queue.AttrReason], "panicked") {
			t.Errorf("dead letter %v, want one whose reason says the handler panicked", ms)
		}
	})
}

// A message received more often than MaxDequeueCount (its earlier leases expired unsettled,
// say a handler that hung the process) is dead-lettered without running the handler again.
func TestOverDequeuedMessageDeadLettered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		e.send(t, 1)
		for range 3 { // three leases that expire unsettled
			if ms, _ := e.q.Receive(context.Background(), 1, time.Second); len(ms) != 1 {
				t.Fatal("setup: message not received")
			}
			time.Sleep(2 * time.Second)
		}
		cfg := baseConfig(e.q, e.dl)
		cfg.MaxDequeueCount = 3
		var runs atomic.Int32
		cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
			runs.Add(1)
			return nil
		})
		l := start(t, cfg)
		synctest.Wait()
		if s := l.State(); s.Poisoned != 1 || runs.Load() != 0 {
			t.Fatalf("poisoned %d, handler runs %d; want 1, 0", s.Poisoned, runs.Load())
		}
		ms, _ := e.dl.Receive(context.Background(), 1, time.Minute)
		if len(ms) != 1 || ms[0].Attributes[queue.AttrDequeueCount] != "4" ||
			!strings.Contains(ms[0].Attributes[queue.AttrReason], "exceeds max_dequeue_count 3") {
			t.Errorf("dead letter %+v, want dequeue count 4 and a reason naming the limit", ms)
		}
	})
}

// A message the listener refuses unread (body over MaxMessageBytes) is settled like any
// failure, by the poison policy: it sees a reject carrying the refusal's reason. A policy
// that retries it still gets it dead-lettered (a retry would be refused again, for ever);
// one that drops it drops it.
func TestRefusedMessageSettledByPolicy(t *testing.T) {
	for _, tt := range []struct {
		name     string
		action   outcome.Kind
		poisoned uint64
	}{
		{"retry becomes dead-letter", outcome.KindRetry, 1},
		{"dead-letter", outcome.KindReject, 1},
		{"drop", outcome.KindDrop, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				e.send(t, 1) // a 2-byte body
				cfg := baseConfig(e.q, e.dl)
				cfg.MaxMessageBytes = 1
				var seen []listener.Failure
				cfg.Poison = policyFunc(func(f listener.Failure) outcome.Outcome {
					seen = append(seen, f)
					if len(seen) > 1 { // retried after all: end the loop, the check below fails
						return outcome.DeadLetter("")
					}
					return outcome.Outcome{Kind: tt.action}
				})
				var runs atomic.Int32
				cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
					runs.Add(1)
					return nil
				})
				l := start(t, cfg)
				synctest.Wait()
				const reason = "message body of 2 bytes exceeds max_message_bytes 1"
				if len(seen) != 1 || seen[0].Outcome.Kind != outcome.KindReject || seen[0].Outcome.Reason() != reason {
					t.Fatalf("policy saw %+v; want one reject with reason %q", seen, reason)
				}
				if s := l.State(); s.Poisoned != tt.poisoned || s.Retried != 0 || runs.Load() != 0 {
					t.Fatalf("poisoned %d, retried %d, handler runs %d; want %d, 0, 0", s.Poisoned, s.Retried, runs.Load(), tt.poisoned)
				}
				if tt.poisoned == 1 {
					ms, _ := e.dl.Receive(context.Background(), 1, time.Minute)
					if len(ms) != 1 || ms[0].Attributes[queue.AttrReason] != reason {
						t.Errorf("dead letter %+v, want reason %q", ms, reason)
					}
				}
				if d, _ := e.q.Depth(context.Background()); d != 0 {
					t.Errorf("queue depth %d after settling, want 0", d)
				}
			})
		})
	}
}

// Absurd poison decisions are clamped: a negative delay retries now, an unknown action
// retries (never loses the message), a delay beyond 7 days is cut to 7 days.
func TestPoisonDecisionClamped(t *testing.T) {
	for _, tt := range []struct {
		name      string
		decision  outcome.Outcome
		visibleIn time.Duration
	}{
		{"negative delay", outcome.Outcome{Kind: outcome.KindRetry, After: -time.Hour}, 0},
		{"unknown action", outcome.Outcome{Kind: outcome.Kind(99), After: time.Minute}, time.Minute},
		{"huge delay", outcome.Outcome{Kind: outcome.KindRetry, After: 1000 * time.Hour}, 7 * 24 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.MaxWorkers = 1
				cfg.Poison = policyFunc(func(listener.Failure) outcome.Outcome { return tt.decision })
				var runs atomic.Int32
				cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
					runs.Add(1)
					return errors.New("fail")
				})
				e.send(t, 1)
				l := start(t, cfg)
				synctest.Wait()
				if r := runs.Load(); r != 1 && tt.visibleIn > 0 {
					t.Fatalf("handler ran %d times before the retry delay, want 1", r)
				}
				if tt.visibleIn > 0 {
					time.Sleep(tt.visibleIn - time.Second)
					synctest.Wait()
					if r := runs.Load(); r != 1 {
						t.Fatalf("handler ran again before %s", tt.visibleIn)
					}
				}
				time.Sleep(2 * time.Minute) // the poller's interval, then the retry is due
				synctest.Wait()
				if r := runs.Load(); r < 2 {
					t.Errorf("message not retried after %s: %d runs", tt.visibleIn, r)
				}
				if l.State().Retried == 0 {
					t.Error("no retry counted")
				}
			})
		})
	}
}

// TestSlowMessageDoesNotHoldItsBatch: one slow message in a batch neither keeps the batch's
// finished messages leased (their lease budget comes back as each finishes) nor stops new
// messages from being handled while it runs, though the scaler asks for one worker: a
// worker with idle concurrency and free budget behind a slow message is helped by another.
// On the old code the worker waited for its whole batch: the finished messages stayed
// leased and the later ones waited a minute.
func TestSlowMessageDoesNotHoldItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.HandlerSlots = 4
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
			if string(m.Body) == "slow" {
				select {
				case <-release:
				case <-time.After(time.Minute):
				}
				return nil
			}
			time.Sleep(10 * time.Millisecond)
			return nil
		})
		for _, b := range []string{"slow", "fast", "fast", "fast"} {
			if _, err := e.q.Send(context.Background(), []byte(b), queue.SendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		l := start(t, cfg)
		waitFor(t, 10*time.Millisecond, 5*time.Second, "the three fast messages of the first batch", func() bool {
			return l.State().Processed == 3
		})
		if s := l.State(); s.Leased != 1 {
			t.Errorf("%d messages leased while only the slow one runs, want 1: the finished ones hold their budget", s.Leased)
		}
		e.send(t, 20)
		waitFor(t, 10*time.Millisecond, 10*time.Second, "20 later messages handled while the slow one runs", func() bool {
			return l.State().Processed == 23
		})
		if s := l.State(); s.InFlight != 1 || s.HelperWorkers == 0 {
			t.Errorf("in flight %d, helper workers %d; want the slow message still running and a helper started", s.InFlight, s.HelperWorkers)
		}
	})
}
