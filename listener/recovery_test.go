package listener_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
)

// recoverSpy is a spyQueue whose backend says when it serves again (as listener/nats does).
type recoverSpy struct {
	*spyQueue
	mu sync.Mutex
	ch chan struct{}
}

func (r *recoverSpy) Recovered() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch == nil {
		r.ch = make(chan struct{})
	}
	return r.ch
}

func (r *recoverSpy) fire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ch != nil {
		close(r.ch)
		r.ch = nil
	}
}

// outage runs a listener of 8 busy workers on q (spy underneath), fails the backend for
// down, brings it back (calling back, if set, at that moment) and returns how long after
// that the next receive was made.
func outage(t *testing.T, q queue.Queue, spy *spyQueue, e memEnv, down time.Duration, back func(*running)) time.Duration {
	t.Helper()
	cfg := baseConfig(q, e.dl)
	cfg.BatchSize = 1
	cfg.Scaler = fixedScaler(8)
	cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
		time.Sleep(time.Second)
		return nil
	})
	e.send(t, 400)
	l := start(t, cfg)
	time.Sleep(1500 * time.Millisecond)
	synctest.Wait()
	if a := l.State().ActiveWorkers; a != 8 {
		t.Fatalf("%d workers busy before the outage, want 8", a)
	}
	spy.failing.Store(true)
	time.Sleep(down)
	synctest.Wait()
	spy.failing.Store(false)
	up := time.Now()
	if back != nil {
		back(l)
	}
	time.Sleep(2 * time.Minute)
	synctest.Wait()
	for _, r := range spy.times(true) {
		if !r.Before(up) {
			return r.Sub(up)
		}
	}
	t.Fatalf("no receive in the 2 minutes after a %s outage ended", down)
	return 0
}

// The workers that fail together when the backend goes down count as one failure: the
// back-off doubles once per failed round, so the pause after the outage is never longer
// than the outage was. (Counted per worker, 8 failures at once made the first pause
// MinIdle·2^7 = 12.8 s after a 5 s outage.)
func TestOutageCountsOncePerRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		spy := &spyQueue{Queue: e.q}
		down := 5 * time.Second
		if after := outage(t, spy, spy, e, down, nil); after > down {
			t.Errorf("the first receive came %s after a %s outage ended; want at most the outage's length (one doubling per failed round)", after, down)
		}
	})
}

// Any sign of recovery ends the back-off at once, whatever the outage's length: the
// backend's own signal (a reconnect, an answered probe), or a Notify (a send went through).
func TestRecoveryEndsBackoff(t *testing.T) {
	for _, tc := range []struct {
		name string
		sign func(*recoverSpy, *running)
	}{
		{"backend signal", func(r *recoverSpy, _ *running) { r.fire() }},
		{"notify", func(_ *recoverSpy, l *running) { l.Notify() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				spy := &spyQueue{Queue: e.q}
				rs := &recoverSpy{spyQueue: spy}
				after := outage(t, rs, spy, e, 3*time.Minute, func(l *running) { tc.sign(rs, l) })
				if after > 0 {
					t.Errorf("the first receive came %s after the backend recovered and said so (%s); want at once", after, tc.name)
				}
			})
		})
	}
}

// A receive that succeeds ends the other workers' back-off: one worker backs off after
// failed receives while another is in a long call; when that call ends (the backend back
// meanwhile) and its worker's next receive succeeds, the backing-off worker receives at
// once instead of sleeping out its doubled interval.
func TestSuccessfulReceiveEndsOthersBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		spy := &spyQueue{Queue: e.q}
		cfg := baseConfig(spy, e.dl)
		cfg.BatchSize = 1
		cfg.Scaler = fixedScaler(2)
		cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
			time.Sleep(40 * time.Second)
			return nil
		})
		e.send(t, 1)
		begin := time.Now()
		l := start(t, cfg)
		time.Sleep(time.Second)
		synctest.Wait()
		if s := l.State(); s.InFlight != 1 {
			t.Fatalf("%d calls running, want the one long call", s.InFlight)
		}
		spy.failing.Store(true) // the idle worker's receives fail: it backs off, doubling
		time.Sleep(29 * time.Second)
		spy.failing.Store(false) // back at 30 s; the long call ends at 40 s
		time.Sleep(30 * time.Second)
		synctest.Wait()
		callEnd := begin.Add(40 * time.Second)
		n := 0
		for _, r := range spy.times(true) {
			if !r.Before(callEnd) && r.Before(callEnd.Add(100*time.Millisecond)) {
				n++
			}
		}
		// The call's worker receives after its delete; the backing-off one is woken by that.
		if n < 2 {
			t.Errorf("%d receives within 100ms of the long call's end, want 2: the backing-off worker kept sleeping after another worker's receive succeeded", n)
		}
	})
}
