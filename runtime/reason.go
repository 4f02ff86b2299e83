package runtime

import (
	"fmt"
	"strings"
)

// statusError is a call that ended with a status the ABI does not know: an unknown
// wqhost/v1 return status, or a wasi-stdio exit code other than 0, 75 and 65. It matches
// ErrBadStatus, but its text says what happened in the ABI's own words instead of chaining
// ErrBadStatus's ("exit code 1: : handler returned an unknown status" read like an empty
// field and a host fault, where docs/abi.md calls the exit code a failure).
type statusError struct{ text string }

func (e *statusError) Error() string { return e.text }
func (e *statusError) Unwrap() error { return ErrBadStatus }

// outputError is a call whose output the runtime refused (a wasi-stdio program's stdout
// past the output limit). It matches ErrOutputRefused and keeps its own text.
type outputError struct{ text string }

func (e *outputError) Error() string { return e.text }
func (e *outputError) Unwrap() error { return ErrOutputRefused }

// withReason appends the guest's reason (set_error, or stderr's last line) when it gave one.
func withReason(s, reason string) string {
	if reason = strings.TrimSpace(reason); reason != "" {
		return s + ": " + reason
	}
	return s + " (the handler gave no reason)"
}

// badStatus is the error of a wqhost/v1 call (who: "message <id>" or a batch) that returned
// status rc, which is none of 0 ok, 1 retry, 2 reject.
func badStatus(who string, rc int32, reason string) error {
	return &statusError{withReason(fmt.Sprintf("runtime: %s: failed: the handler returned status %d, which is not 0 (ok), 1 (retry) or 2 (reject)", who, rc), reason)}
}

// exitFailure is the error of a wasi-stdio program that exited with code, a failure (0 is
// ok, 75 retry, 65 reject); reason is stderr's last line.
func exitFailure(id string, code uint32, reason string) error {
	return &statusError{withReason(fmt.Sprintf("runtime: message %s: failed: the program exited with code %d (0 is ok, 75 retry, 65 reject, anything else a failure)", id, code), reason)}
}
