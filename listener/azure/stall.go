package azure

import (
	"sync"
	"time"
)

// stallAfter is how long a storage call may run before the queue logs that storage stalls.
// Calls take milliseconds when storage is healthy; azcore's retries of a failing call are
// part of the call, so an outage that fails fast shows in the errors instead, and one that
// hangs (a frozen emulator, a black-holed connection, 30s per try) shows here.
const stallAfter = 5 * time.Second

// stallWatch is a queue's record of its stalled storage calls: one warning when a call has
// run for stallAfter (naming the queue and the call), none for the other calls that stall
// meanwhile, and one line when the last of them ends, saying how long the stall lasted. A
// 20 s storage freeze used to log nothing at all.
type stallWatch struct {
	mu      sync.Mutex
	stalled int       // calls past stallAfter still running
	since   time.Time // when the first of them started
}

// watchStall starts watching one call (what: "receive from", "delete", ...); the caller
// calls the returned done with the call's outcome when it returns.
func (q *Queue) watchStall(what string) (done func(err error)) {
	start := time.Now()
	const running, stalled, ended = 0, 1, 2
	state := running // under q.stall.mu
	t := time.AfterFunc(stallAfter, func() {
		q.stall.mu.Lock()
		defer q.stall.mu.Unlock()
		if state != running {
			return
		}
		state = stalled
		if q.stall.stalled++; q.stall.stalled == 1 {
			q.stall.since = start
			q.b.log.Warn("azure: storage call stalled: no answer yet", "queue", q.name, "call", what, "waiting", time.Since(start).Round(time.Millisecond))
		}
	})
	return func(err error) {
		t.Stop()
		q.stall.mu.Lock()
		defer q.stall.mu.Unlock()
		was := state
		state = ended
		if was != stalled {
			return
		}
		if q.stall.stalled--; q.stall.stalled == 0 {
			outcome := "answered"
			if err != nil {
				outcome = "failed: " + err.Error()
			}
			q.b.log.Warn("azure: storage recovered from a stall", "queue", q.name, "call", what, "stalled_for", time.Since(q.stall.since).Round(time.Millisecond), "outcome", outcome)
		}
	}
}
