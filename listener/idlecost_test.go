package listener_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
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
		mode string
		push bool
		max  uint64
	}{
		{"poll", false, 100},
		{"push", true, 0},
	} {
		var idle uint64
		t.Run(tt.mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.MaxWorkers = workers
				cfg.Push = tt.push
				cfg.Backoff = builtin.NewBackoff(builtin.BackoffOptions{Rand: seededRand(3)}) // defaults: 100ms, 60s
				cfg.Handler = listener.HandlerFunc(func(context.Context, *listener.Message) error {
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
