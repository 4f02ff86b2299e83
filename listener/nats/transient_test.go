package nats

import (
	"context"
	"errors"
	"fmt"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/listener/queue"
)

// The rule a host's start relies on: what waiting may fix (no server, no answer, a cluster
// forming) is marked queue.ErrUnavailable and is waited for; what it cannot (credentials,
// a missing stream, JetStream off, a bad request) is not, and fails the start.
func TestTransientErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{natsgo.ErrNoServers, true},
		{fmt.Errorf("account info: %w", context.DeadlineExceeded), true},
		{natsgo.ErrTimeout, true},
		{natsgo.ErrNoResponders, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10005}, true},
		{natsgo.ErrAuthorization, false},
		{natsgo.ErrAuthExpired, false},
		{jetstream.ErrStreamNotFound, false},
		{jetstream.ErrJetStreamNotEnabled, false},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeBadRequest}, false},
		{errors.New("tls: failed to verify certificate"), false},
	} {
		got := errors.Is(unavailable(tc.err), queue.ErrUnavailable)
		if got != tc.want {
			t.Errorf("%v: marked unavailable %v, want %v", tc.err, got, tc.want)
		}
		if !errors.Is(unavailable(tc.err), tc.err) {
			t.Errorf("%v: the mark hides the error", tc.err)
		}
	}
}
