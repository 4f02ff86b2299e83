package host

import (
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// poison.jitter reaches the built-in policy: 0 gives the exact doubling delays, 0.1 spreads
// them by up to ±10 % (some of many messages off the exact delay, none outside the range).
func TestPoisonJitterConfig(t *testing.T) {
	for _, tt := range []struct {
		jitter float64
		spread bool
	}{{0, false}, {0.1, true}} {
		p := builtin.NewPoison(builtin.PoisonOptions{BaseDelay: time.Second, MaxDelay: time.Minute, Jitter: poisonJitter(tt.jitter)})
		off := 0
		for i := range 200 {
			m := &queue.Message{ID: string(rune('a'+i%26)) + time.Duration(i).String(), DequeueCount: 2}
			d := p.Decide(context.Background(), listener.Failure{Message: m, MaxDequeueCount: 5})
			if d.After < 1800*time.Millisecond || d.After > 2200*time.Millisecond {
				t.Fatalf("jitter %v: delay %s outside 2s ±10 %%", tt.jitter, d.After)
			}
			if d.After != 2*time.Second {
				off++
			}
		}
		if (off > 0) != tt.spread {
			t.Errorf("jitter %v: %d of 200 delays off 2s; want spread %v", tt.jitter, off, tt.spread)
		}
	}
}
