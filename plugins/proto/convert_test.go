package policyv1

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

func TestRoundTrip(t *testing.T) {
	s := listener.State{
		Queue: "q", Depth: 1, ActiveWorkers: 2, PeakWorkers: 3, MinWorkers: 4, MaxWorkers: 5, InFlight: 6,
		PushEnabled: true, Processed: 7, Failed: 8, Retried: 9, Poisoned: 10, Receives: 11, EmptyReceives: 12,
		Deletes: 13, Updates: 14, Sends: 15, Errors: 16, DepthQueries: 19, LeasesLost: 20, LatencyP50: 17,
		DeadLetterDepth: 21, Leased: 22, LeasedIdle: 23, PeakLeasedIdle: 24, HelperWorkers: 25,
		LatencyP99: 18, Counts: queue.Counts{Visible: 26, Leased: 27, Delayed: 28}, CountsExact: true,
		Released: 29,
	}
	// Every field is set, so a field forgotten by either conversion shows up as a zero.
	if v := reflect.ValueOf(s); func() bool {
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				return true
			}
		}
		return false
	}() {
		t.Fatal("test State leaves a field zero")
	}
	// The depth split stays on the host (status pages, /metrics): a plugin gets Depth, its
	// total, and Leased and InFlight for the work in flight. The wire format has no fields
	// for it; adding them means regenerating policy.pb.go.
	// Released (messages given back unstarted) stays on the host too.
	want := s
	want.Counts, want.CountsExact, want.Released = queue.Counts{}, false, 0
	if got := ToState(FromState(s)); got != want {
		t.Errorf("State round trip = %+v, want %+v", got, want)
	}
	is := listener.IdleState{Idle: 3, ActiveWorkers: 2, PushEnabled: true}
	if got := ToIdleState(FromIdleState(is)); got != is {
		t.Errorf("IdleState round trip = %+v", got)
	}
	f := listener.Failure{
		Message: &queue.Message{ID: "m", Queue: "q", DequeueCount: 3, InsertedAt: time.Unix(5, 6),
			Body: []byte("secret"), LeaseToken: "lease", Attributes: map[string]string{"k": "v"}},
		Outcome: outcome.Outcome{Kind: outcome.KindRetry, After: time.Second, Err: errors.New("boom")}, MaxDequeueCount: 5,
	}
	got := ToFailure(FromFailure(f))
	if o := got.Outcome; o.Reason() != "boom" || o.Kind != outcome.KindRetry || o.After != time.Second || got.MaxDequeueCount != 5 {
		t.Errorf("Failure round trip = %+v", got)
	}
	f.Outcome = outcome.Rejected(errors.New("bad"))
	if o := ToFailure(FromFailure(f)).Outcome; o.Kind != outcome.KindReject || o.After != 0 || o.Reason() != "rejected: bad" {
		t.Errorf("reject round trip = %+v", o)
	}
	f.Outcome = outcome.Failed(nil)
	if o := ToFailure(FromFailure(f)).Outcome; o.Kind != outcome.KindFailed || o.Reason() != "handler failed" {
		t.Errorf("failure round trip = %+v", o)
	}
	m := got.Message
	if m.ID != "m" || m.Queue != "q" || m.DequeueCount != 3 || !m.InsertedAt.Equal(f.Message.InsertedAt) || m.Attributes["k"] != "v" {
		t.Errorf("Message round trip = %+v", m)
	}
	if m.Body != nil || m.LeaseToken != "" {
		t.Errorf("body or lease token crossed to the plugin: %+v", m)
	}
}

func TestToDecision(t *testing.T) {
	tests := []struct {
		in     *Decision
		want   outcome.Outcome
		wantOK bool
	}{
		{&Decision{Action: Action_ACTION_RETRY, DelayNanos: 5}, outcome.Outcome{Kind: outcome.KindRetry, After: 5}, true},
		{&Decision{Action: Action_ACTION_DEAD_LETTER, Reason: "r"}, outcome.DeadLetter("r"), true},
		{&Decision{Action: Action_ACTION_DROP}, outcome.Outcome{Kind: outcome.KindDrop}, true},
		{&Decision{Action: Action(7)}, outcome.Outcome{}, false},
		{FromDecision(outcome.Outcome{Kind: outcome.Kind(99)}), outcome.Outcome{}, false},
	}
	for _, tt := range tests {
		got, ok := ToDecision(tt.in)
		if got.Kind != tt.want.Kind || got.After != tt.want.After || got.Reason() != tt.want.Reason() || ok != tt.wantOK {
			t.Errorf("ToDecision(%v) = %+v,%v, want %+v,%v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}
