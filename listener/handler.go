package listener

import (
	"context"
	"fmt"

	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// Handler processes one message and returns its outcome: outcome.KindDone deletes it, any
// other goes to the PoisonPolicy.
type Handler interface {
	Handle(ctx context.Context, m *queue.Message) outcome.Outcome
}

// HandlerFunc adapts a function that returns an error to Handler (outcome.Of): nil is done,
// an error made by outcome.Retry or outcome.Reject (or wrapping one) asks for that, any other
// is a failure.
type HandlerFunc func(ctx context.Context, m *queue.Message) error

// Handle calls f and returns the outcome its error asks for.
func (f HandlerFunc) Handle(ctx context.Context, m *queue.Message) outcome.Outcome {
	return outcome.Of(f(ctx, m))
}

// refusalError is the reason of a message the listener settles without handling it: its
// text is the whole reason.
type refusalError struct{ err error }

func (e *refusalError) Error() string { return e.err.Error() }

// refused is the outcome of a message the listener settles without handling it (over its
// dequeue count, body above the size limit): a reject whose reason is the formatted text.
func refused(format string, args ...any) outcome.Outcome {
	return outcome.Outcome{Kind: outcome.KindReject, Err: &refusalError{err: fmt.Errorf(format, args...)}}
}

// isRefusal reports whether o is one of the listener's own refusals (refused).
func isRefusal(o outcome.Outcome) bool {
	_, ok := o.Err.(*refusalError)
	return ok && o.Kind == outcome.KindReject
}
