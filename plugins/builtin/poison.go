package builtin

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/wqhost/wqhost/internal/defaults"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
)

// Poison policy defaults, also the host's (poison.base_delay and max_delay): with the
// listener's default MaxDequeueCount of 5 a failing message is retried after 1 s, 2 s, 4 s
// and 8 s (each ±10 %, DefaultJitter) and dead-lettered on its 5th failure, about 15 s
// (at most 16.5 s) after the first. Azure Functions
// retries at once (visibilityTimeout 0); a short first delay keeps that promptness without
// a hot loop. DefaultPoisonMaxDelay also caps a handler's own retry-after.
const (
	DefaultBaseDelay      = defaults.PoisonBaseDelay // 1s
	DefaultFactor         = 2.0
	DefaultPoisonMaxDelay = defaults.PoisonMaxDelay // 60s
)

// PoisonOptions configure RetryThenDeadLetter. Zero or negative values mean the defaults.
type PoisonOptions struct {
	// BaseDelay is the visibility delay after the first failure.
	BaseDelay time.Duration
	// MaxDelay caps every retry delay, a handler's retry-after included; a value below
	// BaseDelay is raised to BaseDelay.
	MaxDelay time.Duration
	// Factor multiplies the delay after each further failure; values below 1 (or NaN) mean
	// DefaultFactor, and 1 gives a constant delay.
	Factor float64
	// Jitter spreads each delay the policy picks by up to ±Jitter of it (never past
	// MaxDelay); 0 means DefaultJitter (±10 %), a negative value none. A handler's own
	// retry-after is not jittered.
	Jitter float64
}

// RetryThenDeadLetter is the default listener.PoisonPolicy. A message the handler rejected
// is dead-lettered at once with the error text as its reason. Otherwise it is retried after
// BaseDelay·Factor^(dequeueCount−1), capped at MaxDelay and spread by ±Jitter (or after the
// handler's retry-after, capped too, not spread), until its dequeue count reaches the binding's max_dequeue_count; that failure
// dead-letters it with a reason giving the count and the error text.
type RetryThenDeadLetter struct {
	base, maxDelay time.Duration
	factor, jitter float64
}

var _ listener.PoisonPolicy = (*RetryThenDeadLetter)(nil)

// NewPoison returns the retry-then-dead-letter policy with o's settings, defaults filled in.
func NewPoison(o PoisonOptions) *RetryThenDeadLetter {
	if o.BaseDelay <= 0 {
		o.BaseDelay = DefaultBaseDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultPoisonMaxDelay
	}
	if o.MaxDelay < o.BaseDelay {
		o.MaxDelay = o.BaseDelay
	}
	if !(o.Factor >= 1) || math.IsInf(o.Factor, 0) {
		o.Factor = DefaultFactor
	}
	if o.Jitter == 0 || math.IsNaN(o.Jitter) {
		o.Jitter = DefaultJitter
	}
	return &RetryThenDeadLetter{base: o.BaseDelay, maxDelay: o.MaxDelay, factor: o.Factor, jitter: min(o.Jitter, 1)}
}

// Decide implements listener.PoisonPolicy.
func (p *RetryThenDeadLetter) Decide(_ context.Context, f listener.Failure) outcome.Outcome {
	o := f.Outcome
	if o.Kind == outcome.KindReject {
		return outcome.DeadLetter(o.Reason())
	}
	count, id := 1, ""
	if f.Message != nil {
		count, id = max(f.Message.DequeueCount, 1), f.Message.ID
	}
	limit := f.MaxDequeueCount
	if limit <= 0 {
		limit = listener.DefaultMaxDequeueCount
	}
	if count >= limit {
		return outcome.DeadLetter(fmt.Sprintf("failed %d times (max_dequeue_count %d): %s", count, limit, o.Reason()))
	}
	if o.Kind == outcome.KindRetry && o.After > 0 {
		return outcome.Outcome{Kind: outcome.KindRetry, After: min(o.After, p.maxDelay)}
	}
	return outcome.Outcome{Kind: outcome.KindRetry, After: jitter(p.delay(count), p.jitter, p.maxDelay, id, count)}
}

// delay is BaseDelay·Factor^(count−1) capped at MaxDelay, computed in float64 so that large
// counts saturate at the cap instead of overflowing.
func (p *RetryThenDeadLetter) delay(count int) time.Duration {
	d := float64(p.base) * math.Pow(p.factor, float64(count-1))
	if d >= float64(p.maxDelay) {
		return p.maxDelay
	}
	return time.Duration(d)
}

// Validate reports options a config should be refused for (NewPoison itself silently
// replaces them): negative delays, a maximum below the base delay, a factor below 1. Field
// names are the config's base_delay, max_delay and factor.
func (o PoisonOptions) Validate() error {
	base := o.BaseDelay
	if base == 0 {
		base = DefaultBaseDelay
	}
	switch {
	case o.BaseDelay < 0:
		return fmt.Errorf("base_delay %s is negative", o.BaseDelay)
	case o.MaxDelay < 0:
		return fmt.Errorf("max_delay %s is negative", o.MaxDelay)
	case o.MaxDelay > 0 && o.MaxDelay < base:
		return fmt.Errorf("max_delay %s is below base_delay %s", o.MaxDelay, base)
	case o.Factor != 0 && !(o.Factor >= 1) || math.IsInf(o.Factor, 0):
		return fmt.Errorf("factor %v must be at least 1 (0 means the default %v)", o.Factor, DefaultFactor)
	}
	return nil
}
