package outcome

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// A handler's error becomes the outcome it asks for, and the reason a dead letter records
// reads the same whether the outcome came as an error (HandlerFunc) or as a value (the host).
func TestOfAndReason(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name   string
		got    Outcome
		kind   Kind
		after  time.Duration
		reason string
	}{
		{"nil is done", Of(nil), KindDone, 0, ""},
		{"plain error fails", Of(boom), KindFailed, 0, "boom"},
		{"reject", Of(Reject(boom)), KindReject, 0, "rejected: boom"},
		{"reject without error", Of(Reject(nil)), KindReject, 0, "rejected"},
		{"wrapped reject", Of(fmt.Errorf("parse: %w", Reject(boom))), KindReject, 0, "parse: rejected: boom"},
		// A retry's reason is its cause: the delay is the policy's to apply, and may differ.
		{"retry", Of(Retry(time.Minute, boom)), KindRetry, time.Minute, "boom"},
		{"retry without error", Of(Retry(time.Second, nil)), KindRetry, time.Second, "retry requested"},
		{"wrapped retry", Of(fmt.Errorf("busy: %w", Retry(time.Second, boom))), KindRetry, time.Second, "boom"},
		{"negative retry is no delay", Of(Retry(-time.Second, boom)), KindRetry, 0, "boom"},
		{"value retry", RetryAfter(time.Minute, boom), KindRetry, time.Minute, "boom"},
		{"value retry without error", RetryAfter(time.Minute, nil), KindRetry, time.Minute, "retry requested"},
		{"value reject", Rejected(boom), KindReject, 0, "rejected: boom"},
		{"value failure", Failed(boom), KindFailed, 0, "boom"},
		{"failure without error", Failed(nil), KindFailed, 0, "handler failed"},
		{"policy dead letter keeps its reason as is", DeadLetter("failed 5 times: boom"), KindReject, 0, "failed 5 times: boom"},
		{"policy dead letter without reason", DeadLetter(""), KindReject, 0, "rejected"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got.Kind != tt.kind || tt.got.After != tt.after || tt.got.Reason() != tt.reason {
				t.Errorf("got %s after %s reason %q; want %s after %s reason %q",
					tt.got.Kind, tt.got.After, tt.got.Reason(), tt.kind, tt.after, tt.reason)
			}
		})
	}
	if !errors.Is(Of(Reject(boom)).Err, boom) || !errors.Is(Of(Retry(time.Second, boom)).Err, boom) {
		t.Error("the handler's error is not kept behind its outcome (errors.Is)")
	}
}
