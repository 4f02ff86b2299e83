package listener

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Handler processes one message. A nil error settles the message as done (deleted); any
// other error is a failure that the PoisonPolicy settles. Wrap an error with Retry or Reject
// to ask for a specific outcome.
type Handler interface {
	Handle(ctx context.Context, m *Message) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, m *Message) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, m *Message) error { return f(ctx, m) }

// RetryError asks for the message to be retried after a delay.
type RetryError struct {
	After time.Duration
	Err   error
}

func (e *RetryError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry requested after %s", e.After)
	}
	return fmt.Sprintf("retry after %s: %v", e.After, e.Err)
}

func (e *RetryError) Unwrap() error { return e.Err }

// Retry returns an error that asks for the message to be retried after d.
func Retry(d time.Duration, err error) error { return &RetryError{After: d, Err: err} }

// RejectError asks for the message to be dead-lettered at once.
type RejectError struct{ Err error }

func (e *RejectError) Error() string {
	if e.Err == nil {
		return "rejected"
	}
	return "rejected: " + e.Err.Error()
}

func (e *RejectError) Unwrap() error { return e.Err }

// Reject returns an error that asks for the message to be dead-lettered now.
func Reject(err error) error { return &RejectError{Err: err} }

// IsReject reports whether err asks for dead-lettering.
func IsReject(err error) bool {
	var r *RejectError
	return errors.As(err, &r)
}
