package listener_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// laggingQueue makes a released message visible a millisecond after the delay asked, as a
// store that rounds times up (or reads its own clock a little later) does.
type laggingQueue struct{ *memory.Queue }

func (q laggingQueue) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	if d > 0 {
		d += time.Millisecond
	}
	return q.Queue.UpdateVisibility(ctx, m, d)
}

// TestRetryDueIsNoSpuriousWakeup: an idle push listener with a long back-off wakes for the
// retry it scheduled; when the queue shows the message a hair later than the listener
// computed, the receive that finds nothing is not a spurious wake-up, whose quiet spell
// (MinIdle, 30 s here) would hold the retry back. It used to: a CLI test then waited 30 s.
func TestRetryDueIsNoSpuriousWakeup(t *testing.T) {
	for _, minWorkers := range []int{0, 1} {
		t.Run(fmt.Sprintf("min_workers=%d", minWorkers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				var calls atomic.Int32
				cfg := baseConfig(laggingQueue{e.q}, e.dl)
				cfg.Push, cfg.MinWorkers = true, minWorkers
				cfg.MinIdle, cfg.MaxIdle = 30*time.Second, 60*time.Second
				cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
					if calls.Add(1) == 1 {
						return outcome.Retry(20*time.Millisecond, errors.New("once more"))
					}
					return nil
				})
				start(t, cfg)
				time.Sleep(time.Second) // idle, in its long back-off
				synctest.Wait()
				if _, err := e.q.Send(context.Background(), []byte("m"), queue.SendOptions{}); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 10*time.Millisecond, 5*time.Second, "the retried message handled again", func() bool { return calls.Load() == 2 })
			})
		})
	}
}
