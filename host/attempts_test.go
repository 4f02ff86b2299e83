package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestDeadLetterCarriesItsAttempts: a dead letter carries every attempt this host made of
// it (wqhost.attempts, docs/metering.md), oldest first, each with its outcome, reason and
// fuel, so the console's message detail can show them. The TinyGo vowels example without an
// output queue asks for a retry on every attempt; max_dequeue_count 3 dead-letters it after
// the third.
func TestDeadLetterCarriesItsAttempts(t *testing.T) {
	h, _ := newHost(t, `  acme:
    bindings:
      vowels:
        queue: in
        module: builtin:count-vowels-tinygo
        max_dequeue_count: 3
        backoff: {min: 5ms, max: 20ms}
`)
	run(t, h)
	send(t, h, "acme", "in", "one message", "another")
	eventually(t, "2 dead letters", func() bool { return depth(t, h, "acme", "in-poison") == 2 })
	for _, m := range drainBodies(t, h, "acme", "in-poison") {
		var as []attempt
		if err := json.Unmarshal([]byte(m.Attributes[queue.AttrAttempts]), &as); err != nil {
			t.Fatalf("dead letter %s: %s=%q: %v", m.ID, queue.AttrAttempts, m.Attributes[queue.AttrAttempts], err)
		}
		if len(as) != 3 {
			t.Fatalf("dead letter %s: %d attempts recorded, want 3: %+v", m.ID, len(as), as)
		}
		for i, a := range as {
			if a.Outcome != "retry" || a.Reason == "" || a.Fuel == 0 || a.At.IsZero() {
				t.Errorf("dead letter %s attempt %d: %+v: want a retry with its reason, fuel and time", m.ID, i+1, a)
			}
			if i > 0 && a.At.Before(as[i-1].At) {
				t.Errorf("dead letter %s: attempt %d at %s before attempt %d at %s", m.ID, i+1, a.At, i, as[i-1].At)
			}
		}
	}
}

// TestAttemptLogBounds: the log keeps the latest maxAttemptsKept attempts of a message,
// forgets a message that succeeded, and tracks at most maxTrackedMessages messages,
// forgetting the oldest first.
func TestAttemptLogBounds(t *testing.T) {
	at := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	fail := outcome.Failed(errors.New("trap"))
	count := func(js string) int {
		var as []attempt
		if err := json.Unmarshal([]byte(js), &as); err != nil {
			t.Fatalf("history %q: %v", js, err)
		}
		return len(as)
	}
	tests := []struct {
		name string
		run  func(l *attemptLog) int // the length of the last history returned
		want int
	}{
		{"latest kept", func(l *attemptLog) (n int) {
			for i := range maxAttemptsKept + 5 {
				n = count(l.failed("m", attemptOf(at.Add(time.Duration(i)), 0, 1, fail)))
			}
			return n
		}, maxAttemptsKept},
		{"success forgets", func(l *attemptLog) int {
			l.failed("m", attemptOf(at, 0, 1, fail))
			l.done("m")
			return count(l.failed("m", attemptOf(at, 0, 1, fail)))
		}, 1},
		{"oldest message forgotten", func(l *attemptLog) int {
			l.failed("first", attemptOf(at, 0, 1, fail))
			for i := range maxTrackedMessages {
				l.failed(fmt.Sprint("m", i), attemptOf(at, 0, 1, fail))
			}
			if got := len(l.byID); got > maxTrackedMessages {
				t.Errorf("%d messages tracked, bound %d", got, maxTrackedMessages)
			}
			return count(l.failed("first", attemptOf(at, 0, 1, fail)))
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l attemptLog
			if got := tt.run(&l); got != tt.want {
				t.Errorf("history of %d attempts, want %d", got, tt.want)
			}
		})
	}
}
