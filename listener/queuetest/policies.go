package queuetest

import (
	"context"
	"fmt"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
)

// The suite brings minimal policies of its own rather than the built-in ones
// (plugins/builtin): nothing under listener/ imports plugins/ outside tests, and a backend's
// conformance must not depend on how the default policies tune themselves.

// idleBackoff lets the listener clamp every idle delay to its MinIdle..MaxIdle and stops
// surplus workers after a few empty receives.
type idleBackoff struct{}

func (idleBackoff) Next(_ context.Context, s listener.IdleState) (time.Duration, bool) {
	return 0, s.ActiveWorkers > 1 && s.Idle > 3
}

// depthScaler wants one worker per visible message (the listener clamps it).
type depthScaler struct{}

func (depthScaler) Desired(_ context.Context, s listener.State) int {
	return int(min(max(s.Depth, 1), 1<<20))
}

// retryPoison retries a failed message after delay (or the handler's own retry-after) and
// dead-letters it when rejected or when its dequeue count reaches the binding's maximum.
type retryPoison struct{ delay time.Duration }

func (p retryPoison) Decide(_ context.Context, f listener.Failure) outcome.Outcome {
	o := f.Outcome
	text := o.Reason()
	limit := f.MaxDequeueCount
	if limit <= 0 {
		limit = listener.DefaultMaxDequeueCount
	}
	switch {
	case o.Kind == outcome.KindReject:
		return outcome.DeadLetter(text)
	case f.Message.DequeueCount >= limit:
		return outcome.DeadLetter(fmt.Sprintf("failed %d times: %s", f.Message.DequeueCount, text))
	case o.Kind == outcome.KindRetry && o.After > 0:
		return outcome.Outcome{Kind: outcome.KindRetry, After: o.After}
	}
	return outcome.Outcome{Kind: outcome.KindRetry, After: p.delay}
}
