package listener_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// A burst arriving at an idle listener wakes its single poller at once, which asks the
// scaler and fans out to its answer (clamped to MaxWorkers); the workers then drain it.
func TestScaleUpOnBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		// The spy hides memory's Waiter, so the whole burst is queued before Notify wakes
		// the poller (a send would wake it at the first message, racing the others).
		cfg := baseConfig(&spyQueue{Queue: e.q}, e.dl)
		cfg.MaxWorkers = 8
		cfg.BatchSize = 4
		cfg.Scaler = builtin.NewTarget(10) // 200 messages -> 20 workers, clamped to 8
		var handled atomic.Int64
		cfg.Handler = listener.HandlerFunc(func(ctx context.Context, m *queue.Message) error {
			time.Sleep(time.Second)
			handled.Add(1)
			return nil
		})
		l := start(t, cfg)
		time.Sleep(10 * time.Minute) // long idle: one poller at the maximum interval
		synctest.Wait()
		if s := l.State(); s.ActiveWorkers != 1 || s.PeakWorkers != 1 {
			t.Fatalf("idle: %d active, %d peak workers; want 1 and 1", s.ActiveWorkers, s.PeakWorkers)
		}
		idleQueries := l.State().DepthQueries // the dead-letter depth, read once at start
		e.send(t, 200)
		l.Notify()
		synctest.Wait() // the poller wakes, receives, and the scaler fans out
		s := l.State()
		if s.ActiveWorkers != 8 {
			t.Fatalf("after the burst: %d active workers, want 8 (scaler said 20, MaxWorkers 8)", s.ActiveWorkers)
		}
		if s.DepthQueries-idleQueries != 1 || s.Depth != 200 {
			t.Errorf("scale-up read the depth %d times (depth %d); want once, 200", s.DepthQueries-idleQueries, s.Depth)
		}
		waitFor(t, time.Second, time.Hour, "the burst to drain", func() bool { return l.State().Processed == 200 })
		if handled.Load() != 200 {
			t.Errorf("handler ran %d times, want 200", handled.Load())
		}
	})
}

// The scaler's answer is clamped to MinWorkers..MaxWorkers, however absurd.
func TestScalerAnswerClamped(t *testing.T) {
	for _, tt := range []struct {
		name     string
		answer   int
		min, max int
		want     int
	}{
		{"huge", 1_000_000_000, 1, 6, 6},
		{"negative", -5, 2, 6, 2},
		{"zero", 0, 1, 6, 1},
		{"within", 4, 1, 6, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.MinWorkers, cfg.MaxWorkers, cfg.BatchSize = tt.min, tt.max, 1
				cfg.Scaler = fixedScaler(tt.answer)
				release := make(chan struct{})
				cfg.Handler = listener.HandlerFunc(func(ctx context.Context, m *queue.Message) error {
					<-release
					return nil
				})
				e.send(t, 50)
				l := start(t, cfg)
				synctest.Wait()
				if got := l.State().InFlight; got != tt.want {
					t.Errorf("scaler answered %d: %d workers busy, want %d", tt.answer, got, tt.want)
				}
				close(release)
				waitFor(t, time.Second, time.Hour, "drain", func() bool { return l.State().Processed == 50 })
			})
		})
	}
}

// After a burst with many workers the listener scales down to exactly one poller (seed 000's
// single waiter), which then polls at the back-off maximum; with push wake-ups it scales down
// to none and makes no calls at all, until a wake-up.
func TestScaleDownAfterIdle(t *testing.T) {
	for _, push := range []bool{false, true} {
		name := map[bool]string{false: "poll", true: "push"}[push]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.Push = push
				cfg.PushFallbackPoll = -1 // pure push: TestPushFallbackPoll covers the safety net
				cfg.BatchSize = 1
				cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
					time.Sleep(100 * time.Millisecond)
					return nil
				})
				e.send(t, 1000)
				l := start(t, cfg)
				waitFor(t, 100*time.Millisecond, time.Hour, "drain", func() bool { return l.State().Processed == 1000 })
				if p := l.State().PeakWorkers; p != 16 {
					t.Fatalf("peak workers %d during the burst, want 16", p)
				}
				time.Sleep(2 * time.Minute) // past the idle maximum (60s)
				synctest.Wait()
				want := 1
				if push {
					want = 0
				}
				before := l.State()
				if before.ActiveWorkers != want {
					t.Fatalf("after the idle maximum: %d workers, want %d", before.ActiveWorkers, want)
				}
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				after := l.State()
				got := after.Receives - before.Receives
				if push && got != 0 || !push && (got < 9 || got > 11) {
					t.Errorf("receives in 10 idle minutes: %d; want %s", got, map[bool]string{false: "about 10 (one poller every 60s)", true: "0"}[push])
				}
				if after.ActiveWorkers != want {
					t.Errorf("%d workers after 10 idle minutes, want %d", after.ActiveWorkers, want)
				}
				// A message sent now is picked up at once: the memory queue is a Waiter.
				e.send(t, 1)
				synctest.Wait()
				time.Sleep(200 * time.Millisecond)
				synctest.Wait()
				if p := l.State().Processed; p != 1001 {
					t.Errorf("processed %d after a send to the idle listener, want 1001", p)
				}
			})
		})
	}
}

// With push and a queue that cannot wake the listener itself, the listener sits at zero
// workers and zero calls until Notify, which wakes it at once.
func TestPushNotifyWakesIdleListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		spy := &spyQueue{Queue: e.q} // hides memory's Waiter: only Notify wakes
		cfg := baseConfig(spy, e.dl)
		cfg.Push = true
		cfg.PushFallbackPoll = -1 // explicitly off: TestPushFallbackPoll covers the default
		l := start(t, cfg)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if s := l.State(); s.ActiveWorkers != 0 {
			t.Fatalf("idle push listener runs %d workers, want 0", s.ActiveWorkers)
		}
		before := len(spy.times(false))
		e.send(t, 3) // behind the listener's back: no wake-up
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(spy.times(false)) - before; n != 0 {
			t.Fatalf("idle push listener made %d queue calls in an hour, want 0", n)
		}
		if p := l.State().Processed; p != 0 {
			t.Fatalf("processed %d without a wake-up", p)
		}
		l.Notify()
		synctest.Wait()
		if p := l.State().Processed; p != 3 {
			t.Errorf("processed %d right after Notify, want 3", p)
		}
	})
}

// The idle poller's intervals stay within MinIdle..MaxIdle whatever the back-off policy
// answers, and at MaxIdle within its top 10 %.
func TestBackoffIntervalsWithinBounds(t *testing.T) {
	for _, tt := range []struct {
		name    string
		backoff listener.Backoff
		minGap  time.Duration
		maxGap  time.Duration
	}{
		{"builtin", builtin.NewBackoff(builtin.BackoffOptions{Rand: seededRand(7)}), 100 * time.Millisecond, time.Minute},
		{"negative delay", fixedBackoff{d: -time.Hour}, 100 * time.Millisecond, 100 * time.Millisecond},
		// A policy answering the maximum or more gets the same spread at the cap as the
		// built-in back-off: the top 10 % of the range.
		{"huge delay", fixedBackoff{d: 1000 * time.Hour}, time.Minute - time.Duration(builtin.CapJitter*float64(time.Minute-100*time.Millisecond)), time.Minute},
		{"stop the last worker", fixedBackoff{d: time.Second, stop: true}, time.Second, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				spy := &spyQueue{Queue: e.q}
				cfg := baseConfig(spy, e.dl)
				cfg.Backoff = tt.backoff
				l := start(t, cfg)
				time.Sleep(30 * time.Minute)
				synctest.Wait()
				rs := spy.times(true)
				if len(rs) < 25 {
					t.Fatalf("%d receives in 30 idle minutes; the poller stopped (want one poller left)", len(rs))
				}
				var last time.Duration
				for i := 1; i < len(rs); i++ {
					gap := rs[i].Sub(rs[i-1])
					if gap < tt.minGap || gap > tt.maxGap {
						t.Fatalf("gap %d between receives %s, outside %s..%s", i, gap, tt.minGap, tt.maxGap)
					}
					last = gap
				}
				// At the maximum the built-in back-off jitters below it (builtin.CapJitter).
				if capLow := tt.maxGap - time.Duration(builtin.CapJitter*float64(tt.maxGap-min(tt.minGap, listener.DefaultMinIdle))); last > tt.maxGap || last < capLow {
					t.Errorf("final interval %s, want the maximum %s less at most its jitter (%s)", last, tt.maxGap, capLow)
				}
				if s := l.State(); s.ActiveWorkers != 1 {
					t.Errorf("%d workers, want 1", s.ActiveWorkers)
				}
			})
		})
	}
}

// A failing backend is probed by one worker once per back-off interval, the interval
// doubling from MinIdle to ErrorBackoffMax: never a hot loop, never a call per worker.
func TestBackendErrorsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		spy := &spyQueue{Queue: e.q}
		cfg := baseConfig(spy, e.dl)
		cfg.BatchSize = 1
		cfg.Scaler = fixedScaler(8)
		cfg.ErrorBackoffMax = 10 * time.Second
		cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
			time.Sleep(time.Second)
			return nil
		})
		e.send(t, 100)
		l := start(t, cfg)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if a := l.State().ActiveWorkers; a != 8 {
			t.Fatalf("%d workers busy before the outage, want 8", a)
		}
		spy.failing.Store(true)
		outage := time.Now()
		time.Sleep(10 * time.Minute)
		synctest.Wait()

		var rs []time.Time
		for _, c := range spy.times(false) {
			if !c.Before(outage) {
				rs = append(rs, c)
			}
		}
		// Workers that were busy when the outage began each fail once (their settle calls
		// and one receive) within the first second; from then on one prober remains.
		var probes []time.Time
		for _, r := range rs {
			if r.Sub(outage) > 2*time.Second {
				probes = append(probes, r)
			}
		}
		minGap := time.Duration(0)
		for i := 1; i < len(probes); i++ {
			gap := probes[i].Sub(probes[i-1])
			if gap < minGap {
				t.Fatalf("probe %d after %s, shorter than the previous interval %s: back-off must not shrink during an outage", i, gap, minGap)
			}
			if gap > 10*time.Second {
				t.Fatalf("probe %d after %s, longer than ErrorBackoffMax 10s", i, gap)
			}
			minGap = gap
		}
		if minGap != 10*time.Second {
			t.Errorf("final probe interval %s, want ErrorBackoffMax 10s", minGap)
		}
		// 10 minutes at one call per 10s is 60; a hot loop or one prober per worker is far more.
		if n := len(probes); n < 55 || n > 62 {
			t.Errorf("%d calls in the 10 minutes of outage after the first 2s, want about 60", n)
		}
		early := len(rs) - len(probes)
		if early > 8*3 {
			t.Errorf("%d calls in the outage's first 2s from 8 workers, want at most 3 per worker", early)
		}
		if s := l.State(); s.ActiveWorkers != 1 || s.Errors == 0 {
			t.Errorf("during the outage: %d workers, %d errors; want 1 prober and errors counted", s.ActiveWorkers, s.Errors)
		}
		// Recovery: the prober finds work and the scaler fans out again.
		spy.failing.Store(false)
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if a := l.State().ActiveWorkers; a != 8 {
			t.Errorf("%d workers after the outage, want 8 again", a)
		}
		waitFor(t, time.Second, time.Hour, "drain after the outage", func() bool {
			d, _ := e.q.Depth(context.Background())
			return d == 0
		})
	})
}

// spuriousWaiter is a Waiter whose Wait always says a message may be visible.
type spuriousWaiter struct{ queue.Queue }

func (spuriousWaiter) Wait(context.Context, time.Duration) error { return nil }

// A backend whose Wait fires without a message cannot spin the listener: after k wake-ups in
// a row that found nothing, wake-ups are ignored for MinIdle·2^(k-1) up to MaxIdle, so it
// costs about what polling at the back-off maximum does.
func TestSpuriousWakeupsDoNotSpin(t *testing.T) {
	for _, push := range []bool{false, true} {
		t.Run(map[bool]string{false: "poll", true: "push"}[push], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(spuriousWaiter{e.q}, e.dl)
				cfg.Push = push
				l := start(t, cfg)
				time.Sleep(10 * time.Minute)
				synctest.Wait()
				// 10 to reach the 60s maximum, then one a minute: about 20 in 10 minutes.
				if r := l.State().Receives; r > 25 {
					t.Errorf("%d receives in 10 minutes against a spurious Waiter, want at most 25", r)
				}
			})
		})
	}
}

// MinWorkers kept alive while idle do not poll: one of them waits on the queue (seed 000's
// single peek-mode waiter), the others park until it finds work and fans out.
func TestSingleWaiterWithMinWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.MinWorkers, cfg.MaxWorkers, cfg.BatchSize = 4, 8, 1
		release := make(chan struct{})
		cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
			<-release
			return nil
		})
		l := start(t, cfg)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		before := l.State()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		after := l.State()
		if n := after.Receives - before.Receives; n > 11 {
			t.Errorf("%d receives in 10 idle minutes with 4 workers, want about 10 (one waiter)", n)
		}
		if after.ActiveWorkers != 4 {
			t.Errorf("%d workers kept, want MinWorkers 4", after.ActiveWorkers)
		}
		e.send(t, 6)
		synctest.Wait()
		if f := l.State().InFlight; f != 4 {
			t.Errorf("%d messages in flight after a wake-up, want the 4 kept workers busy", f)
		}
		close(release)
		waitFor(t, time.Second, time.Hour, "drain", func() bool { return l.State().Processed == 6 })
	})
}

// With push and the default fallback poll, a message put by a producer that never notifies
// is still handled within DefaultPushFallbackPoll, and an idle hour costs one receive per
// fallback interval (12 at the default 5 minutes), not the zero of pure push nor a poll.
func TestPushFallbackPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		spy := &spyQueue{Queue: e.q} // hides memory's Waiter: no wake-up reaches the listener
		cfg := baseConfig(spy, e.dl)
		cfg.Push = true
		l := start(t, cfg)
		time.Sleep(time.Minute)
		synctest.Wait()
		sent := time.Now()
		e.send(t, 3) // behind the listener's back
		waitFor(t, time.Second, 2*listener.DefaultPushFallbackPoll, "the unnotified messages processed", func() bool {
			return l.State().Processed == 3
		})
		if waited := time.Since(sent); waited > listener.DefaultPushFallbackPoll+time.Second {
			t.Errorf("unnotified messages waited %s, want at most the fallback poll %s", waited, listener.DefaultPushFallbackPoll)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		before := len(spy.times(false))
		time.Sleep(time.Hour)
		synctest.Wait()
		n := len(spy.times(false)) - before
		if want := int(time.Hour / listener.DefaultPushFallbackPoll); n < want-1 || n > want+1 {
			t.Errorf("idle push listener with the fallback poll made %d queue calls in an hour, want about %d", n, want)
		}
		t.Logf("push_fallback_poll %s: %d queue calls in an idle hour", listener.DefaultPushFallbackPoll, n)
	})
}
