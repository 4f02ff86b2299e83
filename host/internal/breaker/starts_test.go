package breaker

import (
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/outcome"
)

// TestForcedStartsOfCheapFailuresCount: a cheap trap whose call had to start its instance
// (the trap before threw its instance away) adds that start to the starts of failures in a
// row, and every cheap_failure of them counts as one failure: a handler that traps at once
// after a 40 ms start function opens the breaker as a spinning one does, while one whose
// traps need no start (or with a success in between) keeps it closed. Before, each such
// trap was cheap (its call within cheap_failure) and the breaker never opened.
func TestForcedStartsOfCheapFailuresCount(t *testing.T) {
	trap := outcome.CauseTrap
	for _, tc := range []struct {
		name        string
		opts        Options
		start       time.Duration // each failing call's start
		calls       int
		succeedEach int // a success after every n failures; 0: none
		open        bool
	}{
		// cheap_failure 100ms, threshold 3: 40ms starts count once per 3 failures.
		{name: "restarts add up", opts: Options{Timeout: time.Second}, start: 40 * time.Millisecond, calls: 9, open: true},
		{name: "not yet", opts: Options{Timeout: time.Second}, start: 40 * time.Millisecond, calls: 8},
		{name: "no start", opts: Options{Timeout: time.Second}, calls: 1000},
		{name: "successes between", opts: Options{Timeout: time.Second}, start: 40 * time.Millisecond, calls: 100, succeedEach: 2},
		{name: "threshold 0 (never)", opts: Options{Timeout: time.Second, Threshold: -1}, start: time.Second, calls: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGateWith(tc.opts, NewSuspectSlots(), nil)
			for i := range tc.calls {
				g.RecordCall(trap, tc.start+time.Millisecond, tc.start)
				if tc.succeedEach > 0 && (i+1)%tc.succeedEach == 0 {
					g.RecordCall(outcome.CauseNone, time.Millisecond, 0)
				}
			}
			if st := g.Status(); (st.State == "open") != tc.open {
				t.Errorf("after %d cheap traps each after a %s start: breaker %+v, want open %v", tc.calls, tc.start, st, tc.open)
			}
		})
	}
}
