package builtin

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
)

func fixedRand(r float64) func() float64 { return func() float64 { return r } }

// idles are the idle counts every bounds test walks: the whole growth range, the first
// counts past it, and the nonsense a buggy caller might send.
func idles() []int {
	var out []int
	for i := -3; i <= 80; i++ {
		out = append(out, i)
	}
	return append(out, 1023, 1024, 1025, 1<<20, math.MaxInt32, math.MaxInt)
}

func TestBackoffStaysWithinBounds(t *testing.T) {
	ctx := context.Background()
	opts := []struct {
		name     string
		o        BackoffOptions
		min, max time.Duration
	}{
		{"defaults (Functions)", BackoffOptions{}, 100 * time.Millisecond, time.Minute},
		{"whitepaper 1s max", BackoffOptions{MaxIdle: time.Second}, 100 * time.Millisecond, time.Second},
		{"large delta", BackoffOptions{MinIdle: time.Second, MaxIdle: 10 * time.Second, Delta: time.Hour}, time.Second, 10 * time.Second},
		{"tiny delta", BackoffOptions{MinIdle: time.Millisecond, MaxIdle: 2 * time.Millisecond, Delta: time.Nanosecond}, time.Millisecond, 2 * time.Millisecond},
		{"max below min", BackoffOptions{MinIdle: 5 * time.Second, MaxIdle: time.Second}, 5 * time.Second, 5 * time.Second},
	}
	rands := []float64{0, 1e-12, 0.5, 0.999999, 1, -1, 7, math.NaN(), math.Inf(1)}
	for _, tt := range opts {
		for _, r := range rands {
			b := NewBackoff(BackoffOptions{MinIdle: tt.o.MinIdle, MaxIdle: tt.o.MaxIdle, Delta: tt.o.Delta, Rand: fixedRand(r)})
			// At the cap the delay is jittered down by up to CapJitter of the range.
			capLow := tt.max - time.Duration(CapJitter*float64(tt.max-tt.min))
			prev := time.Duration(0)
			for _, idle := range idles() {
				d, _ := b.Next(ctx, listener.IdleState{Idle: idle, ActiveWorkers: 2})
				if d < tt.min || d > tt.max {
					t.Fatalf("%s, rand %v: idle %d gave %v, outside [%v, %v]", tt.name, r, idle, d, tt.min, tt.max)
				}
				if d < prev && d < capLow {
					t.Fatalf("%s, rand %v: idle %d gave %v, shorter than the previous %v below the cap's jitter band", tt.name, r, idle, d, prev)
				}
				prev = d
			}
			if prev < capLow {
				t.Errorf("%s, rand %v: never reached the maximum %v less its jitter (last %v)", tt.name, r, tt.max, prev)
			}
		}
	}
}

func TestBackoffFormula(t *testing.T) {
	ctx := context.Background()
	ms := time.Millisecond
	tests := []struct {
		idle int
		rand float64
		want time.Duration
	}{
		// min + (2^idle − 1)·(0.8δ + 0.4δ·rand), δ = 100 ms.
		{1, 0, 100*ms + 80*ms},
		{1, 1, 100*ms + 120*ms},
		{1, 0.5, 200 * ms},
		{0, 0.5, 200 * ms}, // idle counts below 1 act as the first empty receive
		{2, 0.5, 100*ms + 300*ms},
		{3, 0, 100*ms + 7*80*ms},
		{8, 1, 100*ms + 255*120*ms},
		{9, 0, 100*ms + 511*80*ms},    // 40.98 s: the slowest jitter is still under the cap
		{9, 1, time.Minute - 5990*ms}, // 61.42 s would pass the cap: the cap less its jitter (rand 1: 10 % of 59.9 s)
		{10, 0, time.Minute},
		{10, 0.5, time.Minute - 2995*ms},
		{math.MaxInt, 0, time.Minute},
	}
	for _, tt := range tests {
		b := NewBackoff(BackoffOptions{Rand: fixedRand(tt.rand)})
		if got, _ := b.Next(ctx, listener.IdleState{Idle: tt.idle, ActiveWorkers: 1}); got != tt.want {
			t.Errorf("Next(idle %d, rand %v) = %v, want %v", tt.idle, tt.rand, got, tt.want)
		}
	}
}

func TestBackoffStopRule(t *testing.T) {
	ctx := context.Background()
	b := NewBackoff(BackoffOptions{Rand: fixedRand(0.5)})
	const atMax, belowMax = 12, 5
	tests := []struct {
		name   string
		s      listener.IdleState
		stop   bool
		reason string
	}{
		{"at max, other workers active", listener.IdleState{Idle: atMax, ActiveWorkers: 2}, true, ""},
		{"at max, many workers", listener.IdleState{Idle: atMax, ActiveWorkers: 16}, true, ""},
		{"at max, last worker, polling", listener.IdleState{Idle: atMax, ActiveWorkers: 1}, false, "the last poller must stay"},
		{"at max, last worker, push", listener.IdleState{Idle: atMax, ActiveWorkers: 1, PushEnabled: true}, true, "a wake-up restarts the listener"},
		{"below max, many workers", listener.IdleState{Idle: belowMax, ActiveWorkers: 16}, false, "still backing off"},
		{"below max, push", listener.IdleState{Idle: belowMax, ActiveWorkers: 1, PushEnabled: true}, false, "still backing off"},
	}
	for _, tt := range tests {
		if _, stop := b.Next(ctx, tt.s); stop != tt.stop {
			t.Errorf("%s: stop = %v, want %v %s", tt.name, stop, tt.stop, tt.reason)
		}
	}
}

// A surplus worker that finds the queue empty keeps polling with growing delays and stops on
// its 9th or 10th empty receive whatever the jitter: about one to two minutes of idling with
// Functions' bounds.
func TestBackoffSurplusWorkerStopsAfterReachingMax(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		rand      float64
		stopIdle  int
		idleTotal time.Duration // time slept before the stopping receive
	}{
		{0, 10, 9*100*time.Millisecond + (1+3+7+15+31+63+127+255+511)*80*time.Millisecond},
		{1, 9, 8*100*time.Millisecond + (1+3+7+15+31+63+127+255)*120*time.Millisecond},
	}
	for _, tt := range tests {
		b := NewBackoff(BackoffOptions{Rand: fixedRand(tt.rand)})
		var slept time.Duration
		stopped := 0
		for idle := 1; idle <= 100; idle++ {
			d, stop := b.Next(ctx, listener.IdleState{Idle: idle, ActiveWorkers: 3})
			if stop {
				stopped = idle
				break
			}
			slept += d
		}
		if stopped != tt.stopIdle || slept != tt.idleTotal {
			t.Errorf("rand %v: stopped at idle %d after %v asleep, want idle %d after %v", tt.rand, stopped, slept, tt.stopIdle, tt.idleTotal)
		}
	}
}

func TestBackoffDefaultsAndValidate(t *testing.T) {
	tests := []struct {
		o              BackoffOptions
		wantMin, wantM time.Duration
		err            string
	}{
		{BackoffOptions{}, listener.DefaultMinIdle, listener.DefaultMaxIdle, ""},
		{BackoffOptions{MaxIdle: time.Second}, listener.DefaultMinIdle, time.Second, ""},
		{BackoffOptions{MinIdle: -time.Second}, listener.DefaultMinIdle, listener.DefaultMaxIdle, "min_idle -1s is negative"},
		{BackoffOptions{MaxIdle: -time.Second}, listener.DefaultMinIdle, listener.DefaultMaxIdle, "max_idle -1s is negative"},
		{BackoffOptions{Delta: -time.Second}, listener.DefaultMinIdle, listener.DefaultMaxIdle, "delta -1s is negative"},
		{BackoffOptions{MinIdle: 2 * time.Second, MaxIdle: time.Second}, 2 * time.Second, 2 * time.Second, "max_idle 1s is below min_idle 2s"},
		{BackoffOptions{MaxIdle: time.Millisecond}, listener.DefaultMinIdle, listener.DefaultMinIdle, "max_idle 1ms is below min_idle 100ms"},
	}
	for _, tt := range tests {
		lo, hi := NewBackoff(tt.o).Bounds()
		if lo != tt.wantMin || hi != tt.wantM {
			t.Errorf("NewBackoff(%+v).Bounds() = %v, %v; want %v, %v", tt.o, lo, hi, tt.wantMin, tt.wantM)
		}
		err := tt.o.Validate()
		if got := errText(err); got != tt.err {
			t.Errorf("%+v.Validate() = %q, want %q", tt.o, got, tt.err)
		}
	}
}

// The listener's workers share one back-off; an injected source that is not safe for
// concurrent use must still be (the race detector checks).
func TestBackoffConcurrentInjectedRand(t *testing.T) {
	n := 0.0
	b := NewBackoff(BackoffOptions{Rand: func() float64 { n += 0.001; return math.Mod(n, 1) }})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if d, _ := b.Next(context.Background(), listener.IdleState{Idle: i%20 + w, ActiveWorkers: 2}); d < listener.DefaultMinIdle || d > listener.DefaultMaxIdle {
					t.Errorf("delay %v out of bounds", d)
				}
			}
		})
	}
	wg.Wait()
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestBackoffJitterAtTheCap: workers whose delays reached MaxIdle keep drawing them from the
// top CapJitter of the range, so bindings that went idle together do not poll in step (they
// used to, exactly MaxIdle apart); the draws spread over the band and never pass MaxIdle.
func TestBackoffJitterAtTheCap(t *testing.T) {
	ctx := context.Background()
	// A deterministic source walking [0, 1): the draws, not luck, decide the spread.
	var i int
	seq := func() float64 { i++; return float64(i%97) / 97 }
	b := NewBackoff(BackoffOptions{Rand: seq})
	low := listener.DefaultMaxIdle - time.Duration(CapJitter*float64(listener.DefaultMaxIdle-listener.DefaultMinIdle))
	seen := map[time.Duration]bool{}
	lo, hi := listener.DefaultMaxIdle, time.Duration(0)
	for range 200 {
		d, _ := b.Next(ctx, listener.IdleState{Idle: 30, ActiveWorkers: 1})
		if d < low || d > listener.DefaultMaxIdle {
			t.Fatalf("delay at the cap %v outside [%v, %v]", d, low, listener.DefaultMaxIdle)
		}
		seen[d] = true
		lo, hi = min(lo, d), max(hi, d)
	}
	if len(seen) < 50 || hi-lo < 5*time.Second {
		t.Errorf("200 delays at the cap took %d values spanning %v; want them spread over the %v band", len(seen), hi-lo, listener.DefaultMaxIdle-low)
	}
}
