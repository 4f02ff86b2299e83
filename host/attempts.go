package host

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/listener/outcome"
)

// The attempts a binding saw of the messages it failed and has not yet finished, so that a
// dead letter can carry its history (queue.AttrAttempts, shown by the console's message
// detail): when each attempt ran, how long the guest took, the fuel it used and how it
// ended. The log is in memory and bounded: it holds the attempts this host saw (a message
// retried on another host, or before a restart, shows only the attempts seen here), at most
// maxAttemptsKept per message (the latest) and maxTrackedMessages messages (the oldest are
// forgotten first). A message that succeeds is forgotten; the cost on the success path is
// one atomic load while nothing is tracked.
const (
	maxAttemptsKept    = 10
	maxTrackedMessages = 4096
)

// attempt is one handler attempt as a dead letter's history records it.
type attempt struct {
	At      time.Time `json:"at"`
	WallUs  int64     `json:"wall_us"`
	Fuel    uint64    `json:"fuel"`
	Outcome string    `json:"outcome"`
	// Cause is why a failed attempt failed (outcome.Cause: timeout, trap, …); absent when
	// it did not fail (a retry or reject the handler asked for).
	Cause  string `json:"cause,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// attemptLog is a binding's bounded log of failed attempts by message id.
type attemptLog struct {
	tracked atomic.Int64 // len(byID), read without the lock on the success path
	mu      sync.Mutex
	byID    map[string][]attempt
	order   []string // ids in the order they were first tracked (FIFO eviction)
}

// failed records a failed attempt of message id and returns the message's history, this
// attempt last, as JSON.
func (l *attemptLog) failed(id string, a attempt) string {
	l.mu.Lock()
	if l.byID == nil {
		l.byID = map[string][]attempt{}
	}
	h, ok := l.byID[id]
	if !ok {
		for len(l.byID) >= maxTrackedMessages && len(l.order) > 0 {
			delete(l.byID, l.order[0])
			l.order = l.order[1:]
		}
		l.order = append(l.order, id)
	}
	h = append(h, a)
	if len(h) > maxAttemptsKept {
		h = h[len(h)-maxAttemptsKept:]
	}
	l.byID[id] = h
	l.tracked.Store(int64(len(l.byID)))
	js, _ := json.Marshal(h) // attempts hold only strings, numbers and times
	l.mu.Unlock()
	return string(js)
}

// done forgets message id (it succeeded).
func (l *attemptLog) done(id string) {
	if l.tracked.Load() == 0 {
		return
	}
	l.mu.Lock()
	if _, ok := l.byID[id]; ok {
		delete(l.byID, id)
		l.tracked.Store(int64(len(l.byID)))
	}
	// order keeps the id until it reaches the front: eviction skips ids no longer tracked,
	// and the slice is compacted here when it holds far more ids than are tracked.
	if len(l.order) > 2*maxTrackedMessages {
		live := l.order[:0]
		for _, k := range l.order {
			if _, ok := l.byID[k]; ok {
				live = append(live, k)
			}
		}
		l.order = live
	}
	l.mu.Unlock()
}

// attemptOf is the record of an attempt that ended in o.
func attemptOf(at time.Time, wall time.Duration, fuel uint64, o outcome.Outcome) attempt {
	a := attempt{At: at.UTC(), WallUs: wall.Microseconds(), Fuel: fuel, Outcome: o.Kind.String(), Reason: o.Reason()}
	if o.Cause != outcome.CauseNone {
		a.Cause = o.Cause.String()
	}
	return a
}
