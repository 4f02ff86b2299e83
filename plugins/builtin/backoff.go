package builtin

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/wqhost/wqhost/listener"
)

// DefaultDelta is the whitepaper's deltaBackoffMs: the step that the doubling factor
// multiplies, jittered by ±20 %. The default bounds are the listener's own
// (listener.DefaultMinIdle and DefaultMaxIdle, Azure Functions' queue polling bounds; the
// whitepaper's 1 s maximum stays a config choice), so that a policy built with zero options
// and the listener clamping it agree.
const DefaultDelta = 100 * time.Millisecond

// BackoffOptions configure RandomExponential. Zero or negative durations mean the defaults.
type BackoffOptions struct {
	// MinIdle is the shortest delay (the whitepaper's minimumIdleInterval); default
	// listener.DefaultMinIdle.
	MinIdle time.Duration
	// MaxIdle is the longest delay (maximumIdleInterval); default listener.DefaultMaxIdle. A
	// value below MinIdle is raised to MinIdle.
	MaxIdle time.Duration
	// Delta is the growth step δ (the whitepaper's deltaBackoffMs): the n-th consecutive
	// empty receive waits MinIdle + (2^n − 1)·rand(0.8δ..1.2δ). Default DefaultDelta.
	Delta time.Duration
	// Rand returns a number in [0, 1) that picks the jitter; nil uses math/rand/v2.
	// Tests inject it to pin the jitter at its extremes. It is called under a lock, so it
	// need not be safe for concurrent use.
	Rand func() float64
}

// RandomExponential is the whitepaper's random exponential back-off (listener.Backoff):
//
//	delay = min(MinIdle + (2^idle − 1)·rand(0.8δ..1.2δ), MaxIdle)
//
// Once the delay reaches MaxIdle it is jittered below it (CapJitter: the last 10 % of the
// range), so workers stay out of step for good. A worker stops once its delay has reached
// MaxIdle and another worker is still active —
// or, with push wake-ups, whenever it reaches MaxIdle, since a wake-up restarts the
// listener. Jitter keeps workers that went idle together from polling in step, so they
// also stop one by one, down to the single poller (or none) the whitepaper prescribes.
type RandomExponential struct {
	minIdle, maxIdle, delta time.Duration

	mu   sync.Mutex // guards rand when injected
	rand func() float64
}

var _ listener.Backoff = (*RandomExponential)(nil)

// NewBackoff returns the random exponential back-off with o's bounds, defaults filled in.
func NewBackoff(o BackoffOptions) *RandomExponential {
	if o.MinIdle <= 0 {
		o.MinIdle = listener.DefaultMinIdle
	}
	if o.MaxIdle <= 0 {
		o.MaxIdle = listener.DefaultMaxIdle
	}
	if o.MaxIdle < o.MinIdle {
		o.MaxIdle = o.MinIdle
	}
	if o.Delta <= 0 {
		o.Delta = DefaultDelta
	}
	return &RandomExponential{minIdle: o.MinIdle, maxIdle: o.MaxIdle, delta: o.Delta, rand: o.Rand}
}

// Bounds returns the effective minimum and maximum delays.
func (b *RandomExponential) Bounds() (minIdle, maxIdle time.Duration) { return b.minIdle, b.maxIdle }

// CapJitter is the spread of a delay that reached MaxIdle: it is drawn from
// [MaxIdle − CapJitter·(MaxIdle − MinIdle), MaxIdle], so bindings that went idle together
// (a host start, a shared outage) do not keep polling in step, all exactly MaxIdle apart,
// once their growth jitter is used up; it never exceeds MaxIdle, the documented bound.
const CapJitter = 0.1

// Next implements listener.Backoff.
func (b *RandomExponential) Next(_ context.Context, s listener.IdleState) (time.Duration, bool) {
	d, capped := b.delay(s.Idle)
	stop := capped && (s.ActiveWorkers > 1 || s.PushEnabled)
	return d, stop
}

// delay computes the formula in float64 so that no idle count overflows: 2^idle becomes
// +Inf for huge counts, which the comparison with MaxIdle absorbs. capped reports that the
// delay reached MaxIdle (then jittered below it by CapJitter).
func (b *RandomExponential) delay(idle int) (d time.Duration, capped bool) {
	idle = max(idle, 1) // the first empty receive is idle 1; nonsense counts act like it
	step := float64(b.delta) * (0.8 + 0.4*b.uniform())
	growth := (math.Ldexp(1, idle) - 1) * step
	if growth >= float64(b.maxIdle-b.minIdle) {
		return b.atCap(), true
	}
	return b.minIdle + time.Duration(growth), false
}

// atCap is a delay that reached MaxIdle, jittered by CapJitter.
func (b *RandomExponential) atCap() time.Duration {
	spread := CapJitter * float64(b.maxIdle-b.minIdle)
	return b.maxIdle - time.Duration(spread*b.uniform())
}

// uniform returns a number in [0, 1], whatever the injected source returns.
func (b *RandomExponential) uniform() float64 {
	var r float64
	if b.rand == nil {
		r = rand.Float64()
	} else {
		b.mu.Lock()
		r = b.rand()
		b.mu.Unlock()
	}
	switch {
	case math.IsNaN(r):
		return 0.5
	case r < 0:
		return 0
	case r > 1:
		return 1
	}
	return r
}

// Validate reports options a config should be refused for (NewBackoff itself silently
// replaces them): negative durations, or a maximum below the minimum. Field names are the
// config's min_idle, max_idle and delta.
func (o BackoffOptions) Validate() error {
	minIdle := o.MinIdle
	if minIdle == 0 {
		minIdle = listener.DefaultMinIdle
	}
	switch {
	case o.MinIdle < 0:
		return fmt.Errorf("min_idle %s is negative", o.MinIdle)
	case o.MaxIdle < 0:
		return fmt.Errorf("max_idle %s is negative", o.MaxIdle)
	case o.Delta < 0:
		return fmt.Errorf("delta %s is negative", o.Delta)
	case o.MaxIdle > 0 && o.MaxIdle < minIdle:
		return fmt.Errorf("max_idle %s is below min_idle %s", o.MaxIdle, minIdle)
	}
	return nil
}
