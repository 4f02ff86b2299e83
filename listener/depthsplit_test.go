package listener_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// countingCounter counts the Counts calls of a queue that keeps all its capabilities.
type countingCounter struct {
	queue.Decorator
	n *atomic.Int64
}

func (c countingCounter) Counts(ctx context.Context) (queue.Counts, error) {
	c.n.Add(1)
	return c.Decorator.Counts(ctx)
}

// TestDepthSplitFromCounter: over a queue that splits its depth (queue.Counter), State
// reports the split of the listener's last depth read, queue-wide: messages released for a
// later retry count as leased, messages sent with a delay as delayed, and Depth is their
// sum. Reading State makes no queue call (a status scrape is free).
func TestDepthSplitFromCounter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		var countsCalls atomic.Int64
		cfg := baseConfig(countingCounter{queue.Decorator{Queue: e.q}, &countsCalls}, e.dl)
		cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
			if m.Body[0] < 3 {
				return outcome.Retry(time.Hour, errors.New("not yet"))
			}
			return nil
		})
		e.send(t, 10)
		for range 2 {
			if _, err := e.q.Send(context.Background(), []byte{200}, queue.SendOptions{Delay: time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		l := start(t, cfg)
		want := queue.Counts{Visible: 0, Leased: 3, Delayed: 2}
		waitFor(t, 100*time.Millisecond, time.Minute, "7 processed, 3 retried later, 2 delayed", func() bool {
			s := l.State()
			return s.Processed == 7 && s.Retried == 3 && s.CountsExact && s.Counts == want
		})
		if s := l.State(); s.Depth != 5 {
			t.Errorf("Depth = %d, want 5 (the split's sum)", s.Depth)
		}
		before := countsCalls.Load()
		if before == 0 {
			t.Fatal("the split was not read through the queue's Counter")
		}
		for range 1000 {
			_ = l.State()
		}
		if n := countsCalls.Load() - before; n != 0 {
			t.Errorf("1000 State reads made %d Counts calls, want none", n)
		}
	})
}

// TestDepthSplitWithoutCounter: over a queue that knows only its total depth (azure), the
// split is the listener's own: Leased is what it holds, Visible the total less that,
// Delayed 0, and CountsExact false.
func TestDepthSplitWithoutCounter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		q := &spyQueue{Queue: e.q} // hides Counter
		release := make(chan struct{})
		cfg := baseConfig(q, e.dl)
		cfg.MaxWorkers, cfg.BatchSize, cfg.HandlerSlots, cfg.Prefetch = 1, 1, 1, 0
		cfg.Scaler = fixedScaler(1)
		cfg.Handler = listener.HandlerFunc(func(ctx context.Context, _ *queue.Message) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
		e.send(t, 12)
		l := start(t, cfg)
		t.Cleanup(func() { close(release) })
		want := queue.Counts{Visible: 11, Leased: 1}
		waitFor(t, 100*time.Millisecond, time.Minute, "one message held, 11 visible", func() bool {
			s := l.State()
			return s.InFlight == 1 && s.Counts == want
		})
		if s := l.State(); s.CountsExact || s.Depth != 12 {
			t.Errorf("CountsExact = %v, Depth = %d; want false and 12", s.CountsExact, s.Depth)
		}
	})
}

// TestDepthSplitShowsOwnLeasesLive: a binding at max_workers does not read its depth again
// until it idles, but the leases its own handlers hold are known without a queue call, so
// State shows them as leased while the handler runs (the console's live depth): a split read
// before the handler took its lease does not show it unleased.
func TestDepthSplitShowsOwnLeasesLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		release := make(chan struct{})
		var running atomic.Int64
		cfg := baseConfig(e.q, e.dl)
		cfg.MaxWorkers = 1
		cfg.Handler = listener.HandlerFunc(func(ctx context.Context, _ *queue.Message) error {
			running.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		})
		e.send(t, 3)
		l := start(t, cfg)
		waitFor(t, 100*time.Millisecond, 10*time.Minute, "a handler running", func() bool { return running.Load() >= 1 })
		if s := l.State(); s.Counts.Leased < int64(s.Leased) || s.Counts.Visible+s.Counts.Leased != 3 {
			t.Errorf("State().Counts = %+v while handlers hold %d leases: want them leased, 3 in all", s.Counts, s.Leased)
		}
		close(release)
		waitFor(t, 100*time.Millisecond, time.Minute, "3 processed and the depth read again", func() bool {
			s := l.State()
			return s.Processed == 3 && s.Counts == queue.Counts{}
		})
	})
}
