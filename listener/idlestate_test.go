package listener_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// recordingBackoff records every IdleState it is asked about and answers as inner does.
type recordingBackoff struct {
	inner listener.Backoff
	mu    sync.Mutex
	seen  []listener.IdleState
}

func (r *recordingBackoff) Next(ctx context.Context, s listener.IdleState) (time.Duration, bool) {
	r.mu.Lock()
	r.seen = append(r.seen, s)
	r.mu.Unlock()
	return r.inner.Next(ctx, s)
}

func (r *recordingBackoff) calls() []listener.IdleState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]listener.IdleState(nil), r.seen...)
}

// IdleState.Idle is the whitepaper's idleCount: the consecutive empty receives of the
// worker, so a fresh worker's first empty receive is 1, whether Run or a wake-up started it
// (both start it "as if idle", which must not count as an empty receive it never made).
func TestIdleCountStartsAtOne(t *testing.T) {
	for _, tt := range []struct {
		name string
		push bool
	}{
		{"started by Run", false},
		{"started by a wake-up", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				rec := &recordingBackoff{inner: builtin.NewBackoff(builtin.BackoffOptions{Rand: seededRand(5)})}
				if tt.push {
					// The worker stops at its first empty receive; Notify starts a new one.
					cfg.Push, cfg.MinWorkers = true, 0
					rec.inner = fixedBackoff{d: time.Second, stop: true}
				}
				cfg.Backoff = rec
				l := start(t, cfg)
				synctest.Wait()
				if tt.push {
					if got := rec.calls(); len(got) != 1 || l.State().ActiveWorkers != 0 {
						t.Fatalf("push listener asked the back-off %d times and runs %d workers; want 1 and 0", len(got), l.State().ActiveWorkers)
					}
					l.Notify()
					synctest.Wait()
				}
				time.Sleep(10 * time.Second)
				synctest.Wait()
				got := rec.calls()
				if tt.push {
					got = got[1:] // the worker the wake-up started
				}
				if len(got) == 0 {
					t.Fatal("the back-off was never asked")
				}
				for i, s := range got {
					if !tt.push && s.Idle != i+1 {
						t.Fatalf("empty receive %d reported Idle %d, want %d (all: %+v)", i+1, s.Idle, i+1, got)
					}
					if tt.push && s.Idle != 1 {
						t.Fatalf("a woken worker's empty receive reported Idle %d, want 1 (all: %+v)", s.Idle, got)
					}
				}
			})
		})
	}
}

// When a burst is drained, every worker finds the queue empty, but only the one that becomes
// the single waiter asks the back-off policy: the others stop or park whatever it answers,
// and the policy may be an external plugin whose every call costs a round trip.
func TestOnlyTheWaiterAsksBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers = 16
		e := newMem(t)
		// The spy hides memory's Waiter, so the whole burst is queued before Notify wakes
		// the waiter, and the scaler sees all of it.
		cfg := baseConfig(&spyQueue{Queue: e.q}, e.dl)
		cfg.MaxWorkers = workers
		rec := &recordingBackoff{inner: builtin.NewBackoff(builtin.BackoffOptions{Rand: seededRand(9)})}
		cfg.Backoff = rec
		l := start(t, cfg)
		time.Sleep(time.Minute)
		synctest.Wait()
		askedBefore, before := len(rec.calls()), l.State()
		const burst = workers * 32 * 4
		e.send(t, burst)
		l.Notify()
		synctest.Wait() // the fake clock stands still: the drain ends before the waiter's first delay
		after := l.State()
		if after.Processed != burst {
			t.Fatalf("processed %d of the burst of %d without the clock moving", after.Processed, burst)
		}
		if after.PeakWorkers != workers {
			t.Fatalf("the burst ran %d workers at most, want %d", after.PeakWorkers, workers)
		}
		if empty := after.EmptyReceives - before.EmptyReceives; empty < 2 {
			t.Fatalf("%d empty receives ended the burst; the test needs several workers to find the queue empty", empty)
		}
		if asked := len(rec.calls()) - askedBefore; asked != 1 {
			t.Errorf("the back-off was asked %d times when %d workers found the drained queue empty, want once (the waiter)",
				asked, after.EmptyReceives-before.EmptyReceives)
			t.Logf("the calls: %+v", rec.calls()[askedBefore:])
		}
	})
}
