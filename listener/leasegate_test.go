package listener_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
)

// roomGate is a Limiter with LeaseRoom whose room the test sets: -1 no limit, 0 shut, n.
type roomGate struct {
	mu      sync.Mutex
	room    int
	wake    chan struct{}
	maxHeld int // most messages held when the listener asked
	asked   int
}

func (g *roomGate) Acquire(context.Context) error { return nil }
func (g *roomGate) Release()                      {}

func (g *roomGate) LeaseRoom(held int) (int, <-chan struct{}, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	g.maxHeld = max(g.maxHeld, held)
	if g.room < 0 {
		return -1, nil, 0
	}
	if room := g.room - held; room > 0 {
		return room, nil, 0
	}
	return 0, g.wake, 10 * time.Second
}

func (g *roomGate) set(room int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.room = room
	close(g.wake)
	g.wake = make(chan struct{})
}

// A listener whose Limiter has LeaseRoom leases nothing while the gate is shut (the
// messages stay in the queue, their dequeue counts untouched, however long it stays shut),
// at most the gate's room while it is narrowed, and resumes at once when it is opened.
func TestLeaseGateHoldsBackLeasing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		g := &roomGate{room: 0, wake: make(chan struct{})}
		cfg := baseConfig(e.q, e.dl)
		cfg.Limiter = g
		cfg.Scaler = fixedScaler(4)
		cfg.MaxWorkers, cfg.BatchSize = 4, 8
		var mu sync.Mutex
		counts := map[string]int{}
		cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
			mu.Lock()
			counts[m.ID] = m.DequeueCount
			mu.Unlock()
			time.Sleep(time.Second)
			return nil
		})
		ids := e.send(t, 6)
		l := start(t, cfg)
		time.Sleep(time.Hour)
		synctest.Wait()
		if s := l.State(); s.Leased != 0 || s.Processed != 0 {
			t.Fatalf("gate shut for an hour: %d leased, %d processed; want none", s.Leased, s.Processed)
		}
		g.mu.Lock()
		if g.asked == 0 {
			t.Error("the listener never asked the gate")
		}
		g.mu.Unlock()

		g.set(1)
		waitFor(t, 100*time.Millisecond, time.Minute, "all messages handled one lease at a time", func() bool {
			return l.State().Processed == uint64(len(ids))
		})
		g.mu.Lock()
		if g.maxHeld > 1 {
			t.Errorf("the listener held %d leases under a room of 1", g.maxHeld)
		}
		g.mu.Unlock()
		mu.Lock()
		for _, id := range ids {
			if counts[id] != 1 {
				t.Errorf("message %s handled at dequeue count %d; want 1 (never leased while shut)", id, counts[id])
			}
		}
		mu.Unlock()

		g.set(-1)
		e.send(t, 8)
		waitFor(t, 100*time.Millisecond, time.Minute, "the next messages after the gate opened", func() bool {
			return l.State().Processed == uint64(len(ids)+8)
		})
	})
}
