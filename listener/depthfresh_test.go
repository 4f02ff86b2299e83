package listener_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestDepthFreshUnderBacklog: the depth a status page and an autoscaler read follows the
// store while the listener works through a backlog, whatever the workers do: here a binding
// at max_workers whose handler runs 10 s per message (it receives once every 10 s and has
// no worker left to ask the scaler for), while others send 500 messages and then take 200
// away. Over a queue with a Counter the reported depth equals the store's within
// depthEveryCounted (250 ms); over one without (azure, a billed count) within a second,
// reading the depth at most once a second. Before, the depth read at start (0) stood
// until the queue drained: State showed the binding's own 512-style lease count.
func TestDepthFreshUnderBacklog(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counted bool
		within  time.Duration
	}{
		{"counter", true, 250 * time.Millisecond},
		{"depth only", false, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				var q queue.Queue = e.q
				if !tc.counted {
					q = &spyQueue{Queue: e.q} // hides Counter
				}
				cfg := baseConfig(q, e.dl)
				cfg.MaxWorkers, cfg.BatchSize, cfg.HandlerSlots, cfg.Prefetch = 1, 1, 1, 0
				cfg.Scaler = fixedScaler(1)
				cfg.Handler = listener.HandlerFunc(func(ctx context.Context, _ *queue.Message) error {
					select {
					case <-time.After(10 * time.Second):
					case <-ctx.Done():
					}
					return nil
				})
				l := start(t, cfg)
				synctest.Wait()
				e.send(t, 20) // after the start's read: the listener saw an empty queue
				l.Notify()
				waitFor(t, 10*time.Millisecond, time.Minute, "a handler running", func() bool { return l.State().InFlight == 1 })

				// check samples the store and the reported depth every 50 ms for 4 s and
				// fails when they differ for longer than within.
				check := func(what string) {
					t.Helper()
					var since time.Time
					for range 80 {
						truth, err := e.q.Depth(context.Background())
						if err != nil {
							t.Fatal(err)
						}
						s := l.State()
						sum := s.Counts.Visible + s.Counts.Leased + s.Counts.Delayed
						switch {
						case s.Depth == truth && sum == truth:
							since = time.Time{}
						case since.IsZero():
							since = time.Now()
						case time.Since(since) > tc.within:
							t.Fatalf("%s: depth %d (split %+v) while the store holds %d, for %s (want within %s)",
								what, s.Depth, s.Counts, truth, time.Since(since), tc.within)
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
				check("a backlog of 20")
				e.send(t, 500)
				check("500 more sent")
				for range 200 {
					ms, err := e.q.Receive(context.Background(), 1, time.Hour)
					if err != nil || len(ms) != 1 {
						t.Fatalf("receive: %v, %v", ms, err)
					}
					if err := e.q.Delete(context.Background(), ms[0]); err != nil {
						t.Fatal(err)
					}
				}
				check("200 taken by another host")
				s := l.State()
				if s.Processed == 0 {
					t.Errorf("no message processed in 12 s of 10 s handlers")
				}
				if !tc.counted && s.DepthQueries > 16 {
					t.Errorf("%d depth reads in about 12 s of work; want at most one a second (billed)", s.DepthQueries)
				}
				t.Logf("%d depth reads, %d processed", s.DepthQueries, s.Processed)
			})
		})
	}
}
