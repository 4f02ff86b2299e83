package breaker

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener/outcome"
)

// The circuit breaker's rules, step by step on a fake time line: timeout 1s, so the first
// cool-down is 1s, doubling per failed probe up to 8s.
func TestBreakerRules(t *testing.T) {
	type step struct {
		at     time.Duration // time of the step
		call   string        // "ok", "fail" (trap/timeout), or "" (only ask for room)
		held   int           // messages leased when asking
		state  breakerState  // state after the step
		room   int           // room the listener gets after the step
		wakeIn time.Duration // the recheck it gets when room is 0
	}
	tests := []struct {
		name  string
		steps []step
		trips uint64
	}{{
		name: "two failures in a row do not trip; a success resets the count",
		steps: []step{
			{at: 0, call: "fail", state: breakerClosed, room: -1},
			{at: 1, call: "fail", state: breakerClosed, room: -1},
			{at: 2, call: "ok", state: breakerClosed, room: -1},
			{at: 3, call: "fail", state: breakerClosed, room: -1},
			{at: 4, call: "fail", state: breakerClosed, room: -1},
		},
	}, {
		name: "three failures open it: no lease for the cool-down, then one probe",
		steps: []step{
			{at: 0, call: "fail", state: breakerClosed, room: -1},
			{at: 0, call: "fail", state: breakerClosed, room: -1},
			{at: 0, call: "fail", state: breakerOpen, room: 0, wakeIn: time.Second},
			{at: 500 * time.Millisecond, state: breakerOpen, room: 0, wakeIn: 500 * time.Millisecond},
			{at: 500 * time.Millisecond, call: "fail", state: breakerOpen, room: 0, wakeIn: 500 * time.Millisecond}, // leased before it opened: the cool-down is not extended
			{at: time.Second, state: breakerHalfOpen, room: 1},
			{at: time.Second, held: 1, state: breakerHalfOpen, room: 0}, // the probe is out: no second lease
		},
		trips: 1,
	}, {
		name: "a failed probe reopens it with a doubled cool-down, capped at 8 time limits",
		steps: []step{
			{at: 0, call: "fail", room: -1}, {at: 0, call: "fail", room: -1},
			{at: 0, call: "fail", state: breakerOpen, room: 0, wakeIn: time.Second},
			{at: time.Second, state: breakerHalfOpen, room: 1},
			{at: 2 * time.Second, call: "fail", state: breakerOpen, room: 0, wakeIn: 2 * time.Second},
			{at: 4 * time.Second, state: breakerHalfOpen, room: 1},
			{at: 5 * time.Second, call: "fail", state: breakerOpen, room: 0, wakeIn: 4 * time.Second},
			{at: 9 * time.Second, state: breakerHalfOpen, room: 1},
			{at: 10 * time.Second, call: "fail", state: breakerOpen, room: 0, wakeIn: 8 * time.Second},
			{at: 18 * time.Second, state: breakerHalfOpen, room: 1},
			{at: 19 * time.Second, call: "fail", state: breakerOpen, room: 0, wakeIn: 8 * time.Second},
		},
		trips: 5,
	}, {
		name: "a successful probe closes it and resets the cool-down",
		steps: []step{
			{at: 0, call: "fail", room: -1}, {at: 0, call: "fail", room: -1},
			{at: 0, call: "fail", state: breakerOpen, room: 0, wakeIn: time.Second},
			{at: time.Second, state: breakerHalfOpen, room: 1},
			{at: 2 * time.Second, call: "ok", state: breakerClosed, room: -1},
			{at: 3 * time.Second, call: "fail", room: -1}, {at: 3 * time.Second, call: "fail", room: -1},
			{at: 3 * time.Second, call: "fail", state: breakerOpen, room: 0, wakeIn: time.Second},
		},
		trips: 2,
	}, {
		name: "a new module version closes it and forgets the cool-down",
		steps: []step{
			{at: 0, call: "fail", room: -1}, {at: 0, call: "fail", room: -1},
			{at: 0, call: "fail", state: breakerOpen, room: 0, wakeIn: time.Second},
			{at: time.Second, state: breakerHalfOpen, room: 1},
			{at: 2 * time.Second, call: "fail", state: breakerOpen, room: 0, wakeIn: 2 * time.Second},
			{at: 3 * time.Second, call: "reload", state: breakerClosed, room: -1},
			{at: 3 * time.Second, call: "fail", room: -1}, {at: 3 * time.Second, call: "fail", room: -1},
			{at: 3 * time.Second, call: "fail", state: breakerOpen, room: 0, wakeIn: time.Second},
		},
		trips: 3,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBreaker(Options{Timeout: time.Second})
			t0 := time.Unix(1e9, 0)
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				before := b.wake
				switch s.call {
				case "ok":
					b.record(now, false)
				case "fail":
					b.record(now, true)
				case "reload":
					b.reset()
				}
				room, wake, recheck := b.room(now, s.held)
				if got := b.stateNow(); got != s.state {
					t.Fatalf("step %d (%+v): state %s, want %s", i, s, got, s.state)
				}
				if room != s.room {
					t.Fatalf("step %d (%+v): room %d, want %d", i, s, room, s.room)
				}
				if room == 0 && (recheck != s.wakeIn || wake == nil) {
					t.Fatalf("step %d (%+v): recheck %s (wake %v), want %s", i, s, recheck, wake != nil, s.wakeIn)
				}
				if b.wake != before {
					select {
					case <-before:
					default:
						t.Fatalf("step %d: the state changed without waking the waiting workers", i)
					}
				}
			}
			if got := b.trips.Load(); got != tt.trips {
				t.Errorf("trips %d, want %d", got, tt.trips)
			}
		})
	}
}

// The suspect slots: a binding whose breaker is not closed runs no more calls at once than
// the host's suspect slots, shared with every other such binding; a closed one does not
// touch them.
func TestBindingGateSuspectSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		suspect := make(chan struct{}, 1)
		now := time.Now() // the bubble's clock stands still until every goroutine in it blocks
		sick := &Gate{br: newBreaker(Options{Timeout: time.Second}), suspect: suspect}
		other := &Gate{br: newBreaker(Options{Timeout: time.Second}), suspect: suspect}
		healthy := &Gate{br: newBreaker(Options{Timeout: time.Second}), suspect: suspect}
		for _, g := range []*Gate{sick, other} {
			for range DefaultThreshold {
				g.br.record(now, true)
			}
		}
		ctx := context.Background()
		if err := sick.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		if err := other.Acquire(short); err == nil {
			t.Fatal("a second suspect call ran while the only suspect slot was held")
		}
		for range 3 {
			if err := healthy.Acquire(ctx); err != nil {
				t.Fatalf("a closed binding waited for a suspect slot: %v", err)
			}
		}
		sick.Release()
		if err := other.Acquire(ctx); err != nil {
			t.Fatalf("the freed suspect slot was not handed on: %v", err)
		}
		other.Release()
		for range 3 {
			healthy.Release()
		}
		if n := len(suspect); n != 0 {
			t.Errorf("%d suspect slots still held after every call released", n)
		}
	})
}

// A suspect slot whose call failed after d rests for d before the next suspect call takes
// it, so spinning bindings keep a suspect slot busy at most half the time; a closed binding
// is not held back meanwhile.
func TestBindingGateSuspectSlotRests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		suspect := make(chan struct{}, 1)
		sick := &Gate{br: newBreaker(Options{Timeout: time.Second}), suspect: suspect}
		healthy := &Gate{br: newBreaker(Options{Timeout: time.Second}), suspect: suspect}
		for range DefaultThreshold {
			sick.Record(outcome.CauseTimeout, time.Second)
		}
		ctx := context.Background()
		if err := sick.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		sick.Record(outcome.CauseTimeout, time.Second)
		sick.Release()
		begin := time.Now()
		if err := healthy.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		healthy.Release()
		if err := sick.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(begin); waited != time.Second {
			t.Errorf("the next suspect call waited %s after a failed call of 1s; want 1s", waited)
		}
		sick.Record(outcome.CauseNone, time.Millisecond) // a success: the slot is free at once
		sick.Release()
		if n := len(suspect); n != 0 {
			t.Errorf("%d suspect slots held after a successful call released its own", n)
		}
	})
}
