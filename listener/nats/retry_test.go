package nats

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRetryAPIRidesOutAFormingCluster: the refusals a JetStream cluster gives while its nodes
// come up are retried, so a host started beside a restarting cluster waits for it instead of
// failing its start ("no suitable peers for placement, peer offline" creating an R3
// stream); a refusal that stays (a bad request) is returned at once.
func TestRetryAPIRidesOutAFormingCluster(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		tries int // calls made when every call fails with err
	}{
		{"no suitable peers for placement", &jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement, peer offline"}, 3},
		{"temporarily unavailable, wrapped", fmt.Errorf("create stream: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008}), 3},
		{"bad request", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := retryAPI(ctx, func(context.Context) error {
				calls++
				if calls == 3 {
					cancel() // the third try is the last: ctx ends the retries
				}
				return tc.err
			})
			if calls != tc.tries || !errors.Is(err, tc.err) {
				t.Fatalf("%d calls, err %v; want %d calls and the error", calls, err, tc.tries)
			}
		})
	}
	calls := 0
	if err := retryAPI(context.Background(), func(context.Context) error {
		if calls++; calls < 2 {
			return &jetstream.APIError{Code: 400, ErrorCode: 10005}
		}
		return nil
	}); err != nil || calls != 2 {
		t.Fatalf("%d calls, err %v; want the second try to succeed", calls, err)
	}
}
