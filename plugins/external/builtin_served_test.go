package external

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// The built-in policies served by a plugin process decide exactly as in process: what
// crosses the wire (depths, counts, durations, reasons) survives the trip, including the
// extreme values the built-ins clamp.
func TestBuiltinsServedByPluginDecideAlike(t *testing.T) {
	ctx := context.Background()
	p := startBench(t, buildPlugin(t, "./testdata/builtinplugin"))
	if st := p.Status(); !st.Backoff || !st.Scaler || !st.Poison || st.Name != "builtinplugin" {
		t.Fatalf("plugin declared %+v, want all three policies from builtinplugin", st)
	}

	target := builtin.NewTarget(0)
	for _, s := range []listener.State{
		{Queue: "q", Depth: 0, MinWorkers: 1, MaxWorkers: 16},
		{Queue: "q", Depth: 33, MinWorkers: 1, MaxWorkers: 16},
		{Queue: "q", Depth: 100_000, MinWorkers: 1, MaxWorkers: 16},
		{Queue: "q", Depth: -7, MinWorkers: 0, MaxWorkers: 4},
		{Queue: "q", Depth: math.MaxInt64, MinWorkers: 2, MaxWorkers: 64},
	} {
		if got, want := p.Scaler().Desired(ctx, s), target.Desired(ctx, s); got != want {
			t.Errorf("scaler, depth %d, workers %d..%d: plugin %d, in process %d", s.Depth, s.MinWorkers, s.MaxWorkers, got, want)
		}
	}

	poison := builtin.NewPoison(builtin.PoisonOptions{})
	boom := errors.New("boom: order 42 is malformed")
	for _, f := range []listener.Failure{
		{Message: &queue.Message{ID: "a", Queue: "q", DequeueCount: 1}, Outcome: outcome.Failed(boom), MaxDequeueCount: 5},
		{Message: &queue.Message{ID: "a", Queue: "q", DequeueCount: 4}, Outcome: outcome.Failed(boom), MaxDequeueCount: 5},
		{Message: &queue.Message{ID: "a", Queue: "q", DequeueCount: 5}, Outcome: outcome.Failed(boom), MaxDequeueCount: 5},
		{Message: &queue.Message{ID: "a", Queue: "q", DequeueCount: 2}, Outcome: outcome.RetryAfter(1500*time.Millisecond, boom), MaxDequeueCount: 5},
		{Message: &queue.Message{ID: "a", Queue: "q", DequeueCount: 1}, Outcome: outcome.Rejected(boom), MaxDequeueCount: 5},
		{Message: &queue.Message{ID: "a", Queue: "q", DequeueCount: 3}, Outcome: outcome.Failed(boom), MaxDequeueCount: 0},
	} {
		if got, want := p.Poison().Decide(ctx, f), poison.Decide(ctx, f); !sameOutcome(got, want) {
			t.Errorf("poison, dequeue %d of %d, %s: plugin %+v, in process %+v", f.Message.DequeueCount, f.MaxDequeueCount, f.Outcome.Kind, got, want)
		}
	}

	lo, hi := builtin.NewBackoff(builtin.BackoffOptions{}).Bounds()
	for _, tt := range []struct {
		s    listener.IdleState
		stop bool
	}{
		{listener.IdleState{Idle: 1, ActiveWorkers: 4}, false},
		{listener.IdleState{Idle: 40, ActiveWorkers: 4}, true},
		{listener.IdleState{Idle: 40, ActiveWorkers: 1}, false},
		{listener.IdleState{Idle: 40, ActiveWorkers: 1, PushEnabled: true}, true},
		{listener.IdleState{Idle: math.MaxInt32, ActiveWorkers: 1}, false},
	} {
		d, stop := p.Backoff().Next(ctx, tt.s)
		if d < lo || d > hi || stop != tt.stop {
			t.Errorf("back-off %+v: plugin (%v, %v), want a delay in [%v, %v] and stop %v", tt.s, d, stop, lo, hi, tt.stop)
		}
	}
	if st := p.Status(); st.Fallbacks != 0 {
		t.Errorf("%d decisions fell back to the fallback: they were not the plugin's", st.Fallbacks)
	}
}
