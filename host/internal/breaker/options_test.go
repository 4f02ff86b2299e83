package breaker

import (
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/outcome"
)

// TestWhichFailuresCount: time-limit and memory-limit kills always count toward opening the
// breaker; a trap counts only when it came after CheapFailure (default a tenth of the time
// limit), so a handler that traps at once goes the poison policy's way instead of being
// throttled to one probe per cool-down; a returned status never counts.
func TestWhichFailuresCount(t *testing.T) {
	def := Options{Timeout: time.Second}.withDefaults()
	strict := Options{Timeout: time.Second, CheapFailure: -1}.withDefaults()
	tests := []struct {
		name   string
		o      Options
		cause  outcome.Cause
		d      time.Duration
		counts bool
	}{
		{"time limit", def, outcome.CauseTimeout, time.Second, true},
		{"memory limit, at once", def, outcome.CauseMemoryLimit, time.Millisecond, true},
		{"trap at once (bad pointer, unreachable)", def, outcome.CauseTrap, time.Millisecond, false},
		{"trap just under a tenth of the limit", def, outcome.CauseTrap, 99 * time.Millisecond, false},
		{"trap after a tenth of the limit", def, outcome.CauseTrap, 100 * time.Millisecond, true},
		{"trap at once, cheap_failure -1 (every trap counts)", strict, outcome.CauseTrap, time.Millisecond, true},
		{"unknown status / exit code", def, outcome.CauseBadStatus, time.Millisecond, false},
		{"stack overflow", def, outcome.CauseStackOverflow, time.Second, false},
		{"shutdown, reload", def, outcome.CauseHost, time.Second, false},
		{"memory budget", def, outcome.CauseBudgetRefused, time.Second, false},
		{"success", def, outcome.CauseNone, time.Second, false},
	}
	for _, tt := range tests {
		if got := tt.o.counts(tt.cause, tt.d); got != tt.counts {
			t.Errorf("%s: counts %v, want %v", tt.name, got, tt.counts)
		}
	}
	if def.CheapFailure != 100*time.Millisecond || def.Threshold != 3 || def.Cooldown != time.Second || def.MaxCooldown != 8*time.Second {
		t.Errorf("defaults for a 1s time limit: %+v; want cheap 100ms, threshold 3, cool-down 1s up to 8s", def)
	}
}

// TestCheapTrapsKeepTheBreakerClosed: a binding whose every call traps at once keeps its
// breaker closed and leases freely (100 calls), while one whose calls trap after long work
// is cut off after the threshold.
func TestCheapTrapsKeepTheBreakerClosed(t *testing.T) {
	cheap := NewGateWith(Options{Timeout: time.Second}, NewSuspectSlots(), nil)
	for range 100 {
		cheap.Record(outcome.CauseTrap, 2*time.Millisecond)
	}
	if room, _, _ := cheap.LeaseRoom(0); room != -1 || cheap.Status().State != "closed" {
		t.Errorf("after 100 cheap traps: room %d, state %s; want -1 (no limit), closed", room, cheap.Status().State)
	}
	slow := NewGateWith(Options{Timeout: time.Second}, NewSuspectSlots(), nil)
	for range 3 {
		slow.Record(outcome.CauseTrap, 500*time.Millisecond)
	}
	if room, _, _ := slow.LeaseRoom(0); room != 0 || slow.Status().State != "open" {
		t.Errorf("after 3 traps of 500ms: room %d, state %s; want 0, open", room, slow.Status().State)
	}
}

// TestBreakerOptions: threshold, cool-down and its cap are the config's.
func TestBreakerOptions(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	b := newBreaker(Options{Timeout: time.Second, Threshold: 5, Cooldown: 2 * time.Second, MaxCooldown: 5 * time.Second})
	for i := range 4 {
		b.record(t0, true)
		if b.stateNow() != breakerClosed {
			t.Fatalf("open after %d failures, threshold 5", i+1)
		}
	}
	b.record(t0, true)
	now := t0
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		room, _, recheck := b.room(now, 0)
		if b.stateNow() != breakerOpen || room != 0 || recheck != want {
			t.Fatalf("trip %d: state %s room %d recheck %s; want open, 0, %s", i+1, b.stateNow(), room, recheck, want)
		}
		now = now.Add(want)
		if room, _, _ := b.room(now, 0); room != 1 {
			t.Fatalf("trip %d: no probe after the cool-down", i+1)
		}
		b.record(now, true) // the probe fails
	}
	never := newBreaker(Options{Timeout: time.Second, Threshold: -1})
	for range 1000 {
		never.record(t0, true)
	}
	if never.stateNow() != breakerClosed {
		t.Error("threshold -1: the breaker opened")
	}
}
