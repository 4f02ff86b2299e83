package azure_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// receiveClock records when each receive reached the queue.
type receiveClock struct {
	queue.Decorator
	mu    sync.Mutex
	times []time.Time
}

func (r *receiveClock) Receive(ctx context.Context, n int, vis time.Duration) ([]*queue.Message, error) {
	r.mu.Lock()
	r.times = append(r.times, time.Now())
	r.mu.Unlock()
	return r.Decorator.Receive(ctx, n, vis)
}

func (r *receiveClock) intervals() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(r.times); i++ {
		out = append(out, r.times[i].Sub(r.times[i-1]))
	}
	return out
}

// answerMax is a back-off policy (a plugin's, say) that always answers the maximum or more.
type answerMax struct{}

func (answerMax) Next(context.Context, listener.IdleState) (time.Duration, bool) {
	return time.Hour, false
}

// TestIdleBackoffAtCapSpreadAzurite: an idle binding on Azure polls, once its back-off
// reached the cap, at intervals drawn from the top 10 % of the range, read from the real
// receives sent to Azurite, whatever its back-off policy: with backoff 10ms..500ms every
// interval at the cap lies in 451..500 ms (plus the call), and some lie below the cap, so
// bindings that went idle together do not poll in step. A policy answering the maximum (or
// more: the listener clamps it) polled exactly every 500 ms plus the call before, as the
// issue's idle receives came exactly 59 s apart.
func TestIdleBackoffAtCapSpreadAzurite(t *testing.T) {
	srv := server(t)
	be := open(t, srv, azure.EncodingBase64)
	const lo, hi = 10 * time.Millisecond, 500 * time.Millisecond
	for _, tc := range []struct {
		name   string
		policy listener.Backoff
	}{
		{"built-in", builtin.NewBackoff(builtin.BackoffOptions{MinIdle: lo, MaxIdle: hi})},
		{"a policy answering the maximum", answerMax{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &receiveClock{Decorator: queue.Decorator{Queue: openQueue(t, be, "idlecap")}}
			_, stop := run(t, be, rc, func(context.Context, *queue.Message) error { return nil }, func(c *listener.Config) {
				c.Backoff = tc.policy
				c.MinIdle, c.MaxIdle = lo, hi
			})
			// The built-in growth reaches the cap by the 4th empty receive (δ 100ms:
			// 7·80ms > 490ms); 12 receives at the cap follow.
			deadline := time.Now().Add(time.Minute)
			for len(rc.intervals()) < 16 {
				if time.Now().After(deadline) {
					t.Fatalf("only %d idle receives in a minute", len(rc.intervals())+1)
				}
				time.Sleep(50 * time.Millisecond)
			}
			_ = stop()
			atCap := rc.intervals()[4:16]
			floor := hi - (hi-lo)/10
			for i, d := range atCap {
				if d < floor || d > hi+500*time.Millisecond {
					t.Errorf("idle receive interval %d at the cap: %s; want within %s..%s (plus the call)", i, d, floor, hi)
				}
			}
			t.Logf("intervals at the cap: %v", atCap)
			if low := slices.Min(atCap); low >= hi-10*time.Millisecond {
				t.Errorf("12 idle receives at the cap, none drawn below %s (shortest %s): not spread over the top 10%% (%s..%s)",
					hi-10*time.Millisecond, low, floor, hi)
			}
		})
	}
}
