package listener_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// TestIdleCost counts the queue calls of one simulated idle hour that follows a burst, for
// one listener with 16 workers max and the built-in random exponential back-off with Azure
// Functions' bounds (100ms..60s), against a naive poll of once a second per worker. The hour
// starts when the burst is drained: the empty receives by which the workers then active
// find the queue empty (one each, at that same instant) belong to the burst and are logged
// separately.
//
//	go test -run IdleCost -v ./listener/...
func TestIdleCost(t *testing.T) {
	const (
		workers = 16
		burst   = 5000
		naive   = workers * 3600 // one call a second per worker for an hour
	)
	for _, tt := range []struct {
		mode     string
		push     bool
		fallback time.Duration
		max      uint64
	}{
		{"poll", false, 0, 100},
		{"push", true, -1, 0},
		// The default safety net: one receive per fallback interval.
		{"push, default push_fallback_poll 5m", true, 0, 13},
	} {
		var idle uint64
		t.Run(tt.mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.MaxWorkers = workers
				cfg.Push = tt.push
				cfg.PushFallbackPoll = tt.fallback
				cfg.Backoff = builtin.NewBackoff(builtin.BackoffOptions{Rand: seededRand(3)}) // defaults: 100ms, 60s
				cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
					time.Sleep(100 * time.Millisecond)
					return nil
				})
				l := start(t, cfg)
				time.Sleep(time.Minute)
				emptyBefore := l.State().EmptyReceives
				e.send(t, burst)
				waitFor(t, 10*time.Millisecond, time.Hour, "the burst to drain", func() bool { return l.State().Processed == burst })
				synctest.Wait()
				before := l.State()
				if before.PeakWorkers != workers {
					t.Fatalf("the burst ran %d workers at most, want %d", before.PeakWorkers, workers)
				}
				t.Logf("empty receives that found the burst drained: %d", before.EmptyReceives-emptyBefore)
				time.Sleep(time.Hour)
				synctest.Wait()
				after := l.State()
				idle = calls(after) - calls(before)
				if idle > tt.max {
					t.Errorf("%d queue calls in an idle hour, want at most %d", idle, tt.max)
				}
			})
		})
		fmt.Printf("idle calls/hour (%s): %d (naive: %d)\n", tt.mode, idle, naive)
	}
}

// TestIdleCostStatusScrape scrapes an idle listener's state every second for a simulated
// hour, as a Prometheus scrape of /metrics or a /v1/status poll does (both read only
// Listener.State: the depths shown are the ones the listener keeps), and counts the queue
// calls on the input and dead-letter queues beyond those of the same hour unscraped: none.
//
//	go test -run IdleCost -v ./listener/...
func TestIdleCostStatusScrape(t *testing.T) {
	hour := func(scrape bool) (calls uint64, st listener.State) {
		synctest.Test(t, func(t *testing.T) {
			e := newMem(t)
			q, dl := &spyQueue{Queue: e.q}, &spyQueue{Queue: e.dl}
			cfg := baseConfig(q, dl)
			cfg.Backoff = builtin.NewBackoff(builtin.BackoffOptions{Rand: seededRand(3)})
			cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
				if m.Body[0] == 0 {
					return outcome.Reject(nil) // one dead letter: its depth is shown too
				}
				return nil
			})
			e.send(t, 10)
			l := start(t, cfg)
			waitFor(t, time.Second, time.Hour, "the messages settled", func() bool {
				s := l.State()
				return s.Processed+s.Poisoned == 10 && s.DeadLetterDepth == 1 && s.Depth == 0
			})
			time.Sleep(time.Minute)
			synctest.Wait()
			before := len(q.times(false)) + len(dl.times(false))
			for range 3600 {
				if scrape {
					st = l.State()
				}
				time.Sleep(time.Second)
			}
			synctest.Wait()
			calls = uint64(len(q.times(false)) + len(dl.times(false)) - before)
		})
		return calls, st
	}
	quietHour, _ := hour(false)
	scrapedHour, st := hour(true)
	if st.DeadLetterDepth != 1 || st.Depth != 0 {
		t.Errorf("scraped depths: queue %d, dead letters %d; want 0 and 1", st.Depth, st.DeadLetterDepth)
	}
	if scrapedHour != quietHour {
		t.Errorf("an hour scraped every second made %d queue calls, the same hour unscraped %d: a scrape must cost none", scrapedHour, quietHour)
	}
	fmt.Printf("status scrape calls/hour: %d (idle polling in that hour: %d)\n", scrapedHour-quietHour, quietHour)
}
