package host

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/runtime"
)

// OutcomeOf is the one translation of the runtime's result into the outcome the host
// settles a message by: a failed call (r.Err: trap, time limit, …) KindFailed with its
// Cause, else the verdict the guest gave, with its retry delay and reason. `wqhost call`
// prints it, so what it shows is what a binding would settle (before sending outputs).
func OutcomeOf(r *runtime.Result) outcome.Outcome {
	switch {
	case r.Err != nil:
		return outcome.FailedBy(causeOf(r.Err), fmt.Errorf("handler call: %w", r.Err))
	case r.Verdict == runtime.VerdictOK:
		return outcome.Outcome{}
	case r.Verdict == runtime.VerdictRetry:
		return outcome.RetryAfter(r.RetryAfter, errors.New(cmp.Or(r.ErrorText, "handler asked for a retry")))
	}
	return outcome.Rejected(errors.New(cmp.Or(r.ErrorText, "rejected by the handler")))
}

// causeOf is why a call that failed with err failed: the one place above the runtime that
// reads the runtime's errors. The order matters where an error wraps more than one: a time
// limit first (a guest abandoned still running after its time limit timed out), then the
// guest's own limits and traps, then what the host refused.
func causeOf(err error) outcome.Cause {
	switch {
	case err == nil:
		return outcome.CauseNone
	case errors.Is(err, runtime.ErrTimeout):
		return outcome.CauseTimeout
	case errors.Is(err, runtime.ErrMemoryLimit):
		return outcome.CauseMemoryLimit
	case errors.Is(err, runtime.ErrTrap):
		return outcome.CauseTrap
	case errors.Is(err, runtime.ErrStackOverflow):
		return outcome.CauseStackOverflow
	case errors.Is(err, runtime.ErrBadStatus):
		return outcome.CauseBadStatus
	case errors.Is(err, runtime.ErrPluginFailed):
		return outcome.CausePluginFailed
	case errors.Is(err, runtime.ErrOutputRefused):
		return outcome.CauseOutputRefused
	case errors.Is(err, runtime.ErrMemoryBudget):
		return outcome.CauseBudgetRefused
	}
	return outcome.CauseHost
}
