// Package outcome is the one vocabulary for what becomes of a message: a handler call ends in
// an Outcome (the host's adapter fills it in from the runtime's result, a listener.Handler
// returns it), the listener settles by it, and a poison policy reads the handler's Outcome
// and answers with another (retry after a delay, dead-letter with a reason, drop). It
// imports nothing of wqhost's, so the runtime side and the listener side may both use it.
//
// The plugin wire protocol (plugins/proto) keeps its own messages; plugins/proto maps them to
// and from Outcome at the plugin boundary only.
package outcome

import (
	"errors"
	"fmt"
	"time"
)

// Kind is what is to become of a message.
type Kind uint8

// The kinds of outcome. A handler's outcome is KindDone, KindRetry, KindReject or
// KindFailed; a poison policy answers KindRetry, KindReject (dead-letter) or KindDrop.
const (
	// KindDone: handled; the message is deleted. The zero Kind.
	KindDone Kind = iota
	// KindRetry: try the message again after Outcome.After. From a handler, an After of 0
	// lets the poison policy pick the delay; the policy settles it (retry, or dead-letter at
	// max_dequeue_count).
	KindRetry
	// KindReject: the message can never succeed. From a handler: the poison policy settles
	// it (the built-in one dead-letters it at once); from a policy: dead-letter it now.
	KindReject
	// KindFailed: the call failed (trap, time limit, output send); the poison policy settles
	// it.
	KindFailed
	// KindDrop: delete the message without dead-lettering it (a poison policy's answer).
	KindDrop
)

// String returns the kind's name as logs show it.
func (k Kind) String() string {
	switch k {
	case KindDone:
		return "done"
	case KindRetry:
		return "retry"
	case KindReject:
		return "reject"
	case KindFailed:
		return "failed"
	case KindDrop:
		return "drop"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Outcome is how a handler call on one message ended, or what a poison policy decided for
// it. The zero Outcome is KindDone.
//
// Anything else that travels with a message's result to settlement (the call's metering)
// is added here, as a field, and nowhere else.
type Outcome struct {
	Kind Kind
	// After is KindRetry's delay: the one a handler asked for (0: the policy's), or the one a
	// policy decided.
	After time.Duration
	// Err is why (retry, reject, failure); its text is the dead letter's reason (Reason). A
	// retry's is its cause alone: the delay asked for is After, and the poison policy may
	// apply another.
	Err error
	// Cause is why a KindFailed call failed, classified once where the host turned the
	// runtime's result into this Outcome (FailedBy); CauseNone for any other kind, and for
	// a failure whose handler did not say (a Go handler's error: Of).
	Cause Cause
	// Attrs are written on the dead letter beside the listener's own wqhost.* attributes
	// (which win a clash) if this attempt dead-letters the message: the host's metering
	// figures of the failing attempt (docs/metering.md). A policy's answer carries none.
	Attrs map[string]string
}

// Reason is the outcome's reason as a dead letter records it: Err's text, or the kind's
// default when Err is nil.
func (o Outcome) Reason() string {
	if o.Err != nil {
		return o.Err.Error()
	}
	switch o.Kind {
	case KindRetry:
		return "retry requested"
	case KindReject:
		return "rejected"
	case KindFailed:
		return "handler failed"
	}
	return ""
}

// RetryAfter is the outcome of a message to be tried again after d, because of err (nil:
// none given).
func RetryAfter(d time.Duration, err error) Outcome {
	return Outcome{Kind: KindRetry, After: max(d, 0), Err: err}
}

// Rejected is the outcome of a message the handler rejected because of err (nil: none
// given); its reason reads "rejected: " and err's text.
func Rejected(err error) Outcome { return Outcome{Kind: KindReject, Err: Reject(err)} }

// Failed is the outcome of a failed call whose cause is not known.
func Failed(err error) Outcome { return Outcome{Kind: KindFailed, Err: err} }

// FailedBy is the outcome of a call that failed because of c, err saying how.
func FailedBy(c Cause, err error) Outcome { return Outcome{Kind: KindFailed, Err: err, Cause: c} }

// DeadLetter is a poison policy's answer: dead-letter the message now with reason as is
// ("": the handler's outcome's reason).
func DeadLetter(reason string) Outcome {
	if reason == "" {
		return Outcome{Kind: KindReject}
	}
	return Outcome{Kind: KindReject, Err: errors.New(reason)}
}

// retryError asks for the message to be retried after a delay.
type retryError struct {
	after time.Duration
	err   error
}

func (e *retryError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("retry requested after %s", e.after)
	}
	return fmt.Sprintf("retry after %s: %v", e.after, e.err)
}

func (e *retryError) Unwrap() error { return e.err }

// rejectError asks for the message to be dead-lettered at once.
type rejectError struct{ err error }

func (e *rejectError) Error() string {
	if e.err == nil {
		return "rejected"
	}
	return "rejected: " + e.err.Error()
}

func (e *rejectError) Unwrap() error { return e.err }

// Retry returns an error that asks for the message to be retried after d: what a handler
// that returns errors (listener.HandlerFunc) returns for KindRetry.
func Retry(d time.Duration, err error) error {
	return &retryError{after: d, err: err}
}

// Reject returns an error that asks for the message to be dead-lettered now: what a handler
// that returns errors returns for KindReject.
func Reject(err error) error {
	return &rejectError{err: err}
}

// Of is the outcome a handler's error asks for: KindDone for nil, KindReject or KindRetry
// for an error that wraps Reject's or Retry's, KindFailed for any other. Err is err itself,
// but for a retry the cause given to Retry (the delay is After).
func Of(err error) Outcome {
	if err == nil {
		return Outcome{}
	}
	var rj *rejectError
	if errors.As(err, &rj) {
		return Outcome{Kind: KindReject, Err: err}
	}
	var rt *retryError
	if errors.As(err, &rt) {
		return Outcome{Kind: KindRetry, After: max(rt.after, 0), Err: rt.err}
	}
	return Outcome{Kind: KindFailed, Err: err}
}
