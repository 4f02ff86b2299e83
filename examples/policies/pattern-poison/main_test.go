package main

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

func TestDecide(t *testing.T) {
	p := policy{pattern: regexp.MustCompile(`schema|invalid`), delay: 7 * time.Second}
	msg := func(n int) *queue.Message { return &queue.Message{ID: "m1", DequeueCount: n} }
	tests := []struct {
		name      string
		f         listener.Failure
		want      outcome.Kind
		wantDelay time.Duration
	}{
		{"matching error dead-letters at once", listener.Failure{Message: msg(1), Outcome: outcome.Failed(errors.New("bad schema v2")), MaxDequeueCount: 5}, outcome.KindReject, 0},
		{"other error retries with delay", listener.Failure{Message: msg(1), Outcome: outcome.Failed(errors.New("timeout")), MaxDequeueCount: 5}, outcome.KindRetry, 7 * time.Second},
		{"handler retry-after wins", listener.Failure{Message: msg(1), Outcome: outcome.Outcome{Kind: outcome.KindRetry, After: time.Second, Err: errors.New("busy")}, MaxDequeueCount: 5}, outcome.KindRetry, time.Second},
		{"reject dead-letters", listener.Failure{Message: msg(1), Outcome: outcome.Outcome{Kind: outcome.KindReject}}, outcome.KindReject, 0},
		{"max dequeue count dead-letters", listener.Failure{Message: msg(5), Outcome: outcome.Failed(errors.New("timeout")), MaxDequeueCount: 5}, outcome.KindReject, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(context.Background(), tt.f)
			if d.Kind != tt.want || d.After != tt.wantDelay {
				t.Errorf("Decide = %v/%v, want %v/%v", d.Kind, d.After, tt.want, tt.wantDelay)
			}
		})
	}
}
