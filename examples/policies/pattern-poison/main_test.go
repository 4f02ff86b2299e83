package main

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
)

func TestDecide(t *testing.T) {
	p := policy{pattern: regexp.MustCompile(`schema|invalid`), delay: 7 * time.Second}
	msg := func(n int) *queue.Message { return &queue.Message{ID: "m1", DequeueCount: n} }
	tests := []struct {
		name      string
		f         listener.Failure
		want      listener.Action
		wantDelay time.Duration
	}{
		{"matching error dead-letters at once", listener.Failure{Message: msg(1), Err: errors.New("bad schema v2"), MaxDequeueCount: 5}, listener.ActionDeadLetter, 0},
		{"other error retries with delay", listener.Failure{Message: msg(1), Err: errors.New("timeout"), MaxDequeueCount: 5}, listener.ActionRetry, 7 * time.Second},
		{"handler retry-after wins", listener.Failure{Message: msg(1), Err: errors.New("busy"), RetryAfter: time.Second, MaxDequeueCount: 5}, listener.ActionRetry, time.Second},
		{"reject dead-letters", listener.Failure{Message: msg(1), Reject: true}, listener.ActionDeadLetter, 0},
		{"max dequeue count dead-letters", listener.Failure{Message: msg(5), Err: errors.New("timeout"), MaxDequeueCount: 5}, listener.ActionDeadLetter, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(context.Background(), tt.f)
			if d.Action != tt.want || d.Delay != tt.wantDelay {
				t.Errorf("Decide = %v/%v, want %v/%v", d.Action, d.Delay, tt.want, tt.wantDelay)
			}
		})
	}
}
