package listener_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
)

// The Limiter bounds the handler calls in flight across all workers.
func TestLimiterBoundsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.Scaler = fixedScaler(8)
		lim := &semaphore{ch: make(chan struct{}, 3)}
		cfg.Limiter = lim
		var cur, peak atomic.Int32
		cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
			n := cur.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(time.Second)
			cur.Add(-1)
			return nil
		})
		e.send(t, 60)
		l := start(t, cfg)
		waitFor(t, time.Second, time.Hour, "drain", func() bool { return l.State().Processed == 60 })
		if p := peak.Load(); p != 3 {
			t.Errorf("peak concurrent handler calls %d, want the limiter's 3", p)
		}
	})
}

type semaphore struct{ ch chan struct{} }

func (s *semaphore) Acquire(ctx context.Context) error {
	select {
	case s.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *semaphore) Release() { <-s.ch }

// Under a long backlog a worker hands its slot back every TimeSlice, and slots are taken
// again through the scaler, so the worker count follows it while work goes on.
func TestTimeSliceHandsBackSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.BatchSize = 1
		cfg.TimeSlice = 10 * time.Second
		var asked atomic.Int32
		want := atomic.Int32{}
		want.Store(4)
		cfg.Scaler = scalerFunc(func(listener.State) int {
			asked.Add(1)
			return int(want.Load())
		})
		cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
			time.Sleep(time.Second)
			return nil
		})
		e.send(t, 1000)
		l := start(t, cfg)
		time.Sleep(5 * time.Second)
		if a := l.State().ActiveWorkers; a != 4 {
			t.Fatalf("%d workers, want 4", a)
		}
		want.Store(2)
		before := asked.Load()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := asked.Load() - before; n < 2 {
			t.Errorf("scaler asked %d times in 30s of backlog with 10s slices, want slots re-acquired through it", n)
		}
		s := l.State()
		if s.ActiveWorkers > 4 || s.Processed < 60 {
			t.Errorf("%d workers, %d processed after 35s; want the backlog worked on throughout", s.ActiveWorkers, s.Processed)
		}
	})
}

type scalerFunc func(listener.State) int

func (f scalerFunc) Desired(_ context.Context, s listener.State) int { return f(s) }

// State reports handler latency quantiles from its histogram (within its 12.5% buckets).
func TestLatencyQuantiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.MaxWorkers, cfg.BatchSize = 1, 1
		cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
			i := int(m.Body[0]) | int(m.Body[1])<<8
			switch {
			case i < 150:
				time.Sleep(10 * time.Millisecond)
			case i < 198:
				time.Sleep(100 * time.Millisecond)
			default:
				time.Sleep(time.Second)
			}
			return nil
		})
		e.send(t, 200)
		l := start(t, cfg)
		waitFor(t, time.Second, time.Hour, "drain", func() bool { return l.State().Processed == 200 })
		s := l.State()
		if s.LatencyP50 < 10*time.Millisecond || s.LatencyP50 > 11250*time.Microsecond {
			t.Errorf("p50 %s, want 10ms (+12.5%%)", s.LatencyP50)
		}
		if s.LatencyP99 < 100*time.Millisecond || s.LatencyP99 > 112500*time.Microsecond {
			t.Errorf("p99 %s, want 100ms (+12.5%%)", s.LatencyP99)
		}
	})
}
