package listener

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// Handler processes one message. A nil error settles the message as done (deleted); any
// other error is a failure that the PoisonPolicy settles. Wrap an error with Retry or Reject
// to ask for a specific outcome.
type Handler interface {
	Handle(ctx context.Context, m *queue.Message) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, m *queue.Message) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, m *queue.Message) error { return f(ctx, m) }

// retryError asks for the message to be retried after a delay.
type retryError struct {
	After time.Duration
	Err   error
}

func (e *retryError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry requested after %s", e.After)
	}
	return fmt.Sprintf("retry after %s: %v", e.After, e.Err)
}

func (e *retryError) Unwrap() error { return e.Err }

// Retry returns an error that asks for the message to be retried after d.
func Retry(d time.Duration, err error) error { return &retryError{After: d, Err: err} }

// rejectError asks for the message to be dead-lettered at once. bare is set on the
// listener's own refusals (refused): their text is the whole reason, without "rejected: ".
type rejectError struct {
	Err  error
	bare bool
}

func (e *rejectError) Error() string {
	if e.bare {
		return e.Err.Error()
	}
	if e.Err == nil {
		return "rejected"
	}
	return "rejected: " + e.Err.Error()
}

func (e *rejectError) Unwrap() error { return e.Err }

// Reject returns an error that asks for the message to be dead-lettered now.
func Reject(err error) error { return &rejectError{Err: err} }

// IsReject reports whether err asks for dead-lettering.
func IsReject(err error) bool {
	var r *rejectError
	return errors.As(err, &r)
}

// Outcome is what a handler call asks the listener to do with its message.
type Outcome uint8

// Outcomes of a handler call.
const (
	// OutcomeOK: handled; the message is deleted.
	OutcomeOK Outcome = iota
	// OutcomeRetry: the handler asks for another try after Verdict.After; the poison
	// policy settles it (retry, or dead-letter at max_dequeue_count).
	OutcomeRetry
	// OutcomeReject: the message can never succeed; it is dead-lettered at once.
	OutcomeReject
	// OutcomeFailed: the call failed (trap, time limit, output send); the poison policy
	// settles it.
	OutcomeFailed
)

// Verdict is a handler call's result as a value: the listener settles the message from it
// without decoding errors. The zero Verdict is OK.
type Verdict struct {
	Outcome Outcome
	// After is the delay a retry asks for (OutcomeRetry).
	After time.Duration
	// Err is the reason (retry, reject, failed); it becomes the dead letter's reason.
	Err error
	// Attrs are written on the dead letter beside the listener's own wqhost.* attributes
	// (which win a clash) if this attempt dead-letters the message: the host's metering
	// figures of the failing attempt (docs/metering.md).
	Attrs map[string]string
}

// OK is the verdict of a handled message.
func OK() Verdict { return Verdict{} }

// RetryAfter is the verdict of a message to be tried again after d.
func RetryAfter(d time.Duration, err error) Verdict {
	return Verdict{Outcome: OutcomeRetry, After: d, Err: err}
}

// Rejected is the verdict of a message to be dead-lettered now.
func Rejected(err error) Verdict { return Verdict{Outcome: OutcomeReject, Err: err} }

// Failed is the verdict of a failed call.
func Failed(err error) Verdict { return Verdict{Outcome: OutcomeFailed, Err: err} }

// Error returns the verdict as the error a Handler would return: nil for OK, a retryError
// or rejectError for those, Err for a failure.
func (v Verdict) Error() error {
	switch v.Outcome {
	case OutcomeOK:
		return nil
	case OutcomeRetry:
		return Retry(v.After, v.Err)
	case OutcomeReject:
		if re, ok := v.Err.(*rejectError); ok {
			return re
		}
		return Reject(v.Err)
	}
	if v.Err == nil {
		return errors.New("handler failed")
	}
	return v.Err
}

// refused is the verdict of a message the listener settles without handling it (over its
// dequeue count, body above the size limit): a reject whose reason is the formatted text.
func refused(format string, args ...any) Verdict {
	return Verdict{Outcome: OutcomeReject, Err: &rejectError{Err: fmt.Errorf(format, args...), bare: true}}
}

// isRefusal reports whether v is one of the listener's own refusals (refused).
func isRefusal(v Verdict) bool {
	re, ok := v.Err.(*rejectError)
	return ok && re.bare && v.Outcome == OutcomeReject
}

// VerdictOf converts a Handler's error to a verdict (the one place errors are decoded:
// handlers that return verdicts skip it).
func VerdictOf(err error) Verdict {
	if err == nil {
		return OK()
	}
	var re *rejectError
	if errors.As(err, &re) {
		return Verdict{Outcome: OutcomeReject, Err: err}
	}
	var rt *retryError
	if errors.As(err, &rt) {
		return Verdict{Outcome: OutcomeRetry, After: max(rt.After, 0), Err: err}
	}
	return Failed(err)
}

// VerdictHandler is a Handler that returns its result as a Verdict. The listener calls
// HandleMessage instead of Handle when the configured handler implements it.
type VerdictHandler interface {
	Handler
	HandleMessage(ctx context.Context, m *queue.Message) Verdict
}
