package listener_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/internal/goroutinetest"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

// watcherOnly hides a queue's FuncWatcher and Waiter and leaves its Watcher: a backend that
// announces a write on a channel only, waited on in a select.
type watcherOnly struct {
	queue.Queue
	queue.Watcher
}

// waiterOnly hides a queue's Watcher and leaves its Waiter: a backend whose only wake-up
// blocks the caller.
type waiterOnly struct {
	queue.Queue
	queue.Waiter
}

// listenerGoroutines counts the goroutines running listener code (a Listener's method on
// their stack).
func listenerGoroutines() int { return goroutinetest.Count("wqhost/listener.(*Listener).") }

// pushEnv is n push listeners with the default fallback poll, each on its own memory queue
// made into a Queue by wrap. It must be made inside a bubble.
func pushEnv(t *testing.T, n int, wrap func(*memory.Queue) queue.Queue, edit func(*listener.Config)) (memEnv, []*memory.Queue, []*running) {
	t.Helper()
	e := newMem(t)
	qs := make([]*memory.Queue, n)
	ls := make([]*running, n)
	for i := range n {
		q, err := e.be.Queue(context.Background(), fmt.Sprintf("q%d", i))
		if err != nil {
			t.Fatal(err)
		}
		cfg := baseConfig(wrap(q), e.dl)
		cfg.Push = true
		if edit != nil {
			edit(&cfg)
		}
		qs[i], ls[i] = q, start(t, cfg)
	}
	return e, qs, ls
}

// TestIdlePushListenerGoroutines: an idle push listener at MinWorkers 1 keeps no worker. On a
// queue that calls back on a write (FuncWatcher), or has no wake-up of its own (Notify only),
// it waits dormant and holds no goroutine at all: its wake-ups are callbacks. A queue that
// announces writes on a channel only (Watcher) keeps Run's goroutine waiting in one select;
// one that can only block (Waiter) costs one more goroutine, in the wait; MinWorkers 2 keeps
// the waiting worker and a parked one, as with an IdlePacer. A message sent to any of them is
// handled at once, with no fake time passing, and the listener is idle again after it.
func TestIdlePushListenerGoroutines(t *testing.T) {
	for _, tt := range []struct {
		name       string
		wrap       func(*memory.Queue) queue.Queue
		minWorkers int
		notify     bool // only Notify wakes the listener
		perIdle    int  // goroutines in listener code per idle listener
	}{
		{"func watcher", func(q *memory.Queue) queue.Queue { return q }, 1, false, 0},
		{"watcher only", func(q *memory.Queue) queue.Queue { return watcherOnly{q, q} }, 1, false, 1},
		{"waiter only", func(q *memory.Queue) queue.Queue { return waiterOnly{q, q} }, 1, false, 2},
		{"notify only", func(q *memory.Queue) queue.Queue { return &spyQueue{Queue: q} }, 1, true, 0},
		{"min workers 2", func(q *memory.Queue) queue.Queue { return q }, 2, false, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 20
				before := listenerGoroutines()
				_, qs, ls := pushEnv(t, n, tt.wrap, func(c *listener.Config) { c.MinWorkers = tt.minWorkers })
				idle := func(when string) {
					t.Helper()
					time.Sleep(time.Minute)
					synctest.Wait()
					if got := listenerGoroutines() - before; got != n*tt.perIdle {
						t.Fatalf("%s: %d goroutines in listener code for %d idle listeners, want %d each", when, got, n, tt.perIdle)
					}
				}
				idle("after start")
				for i, q := range qs {
					if _, err := q.Send(context.Background(), []byte("m"), queue.SendOptions{}); err != nil {
						t.Fatal(err)
					}
					if tt.notify {
						ls[i].Notify()
					}
					synctest.Wait()
					if p := ls[i].State().Processed; p != 1 {
						t.Fatalf("listener %d processed %d messages right after a send, want 1", i, p)
					}
				}
				idle("after a message each")
			})
		})
	}
}

// TestIdlePushWatcherWaitsForVisibility: a message sent with a delay to an idle push listener
// on a Watcher queue wakes it only when it becomes visible: the send itself (a write that makes
// nothing visible) costs no receive, which would find nothing and count as a spurious wake-up.
func TestIdlePushWatcherWaitsForVisibility(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, qs, ls := pushEnv(t, 1, func(q *memory.Queue) queue.Queue { return q }, nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		l := ls[0]
		before := l.State()
		const delay = 30 * time.Second
		if _, err := qs[0].Send(context.Background(), []byte("later"), queue.SendOptions{Delay: delay}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay - time.Millisecond)
		synctest.Wait()
		if s := l.State(); s.Receives != before.Receives {
			t.Fatalf("%d receives before the delayed message was visible, want none", s.Receives-before.Receives)
		}
		time.Sleep(2 * time.Millisecond) // the wait ends a millisecond after the message is due
		synctest.Wait()
		s := l.State()
		if s.Processed != 1 {
			t.Fatalf("processed %d once the delayed message was visible, want 1", s.Processed)
		}
		if empty := s.EmptyReceives - before.EmptyReceives; empty != 1 {
			t.Errorf("%d empty receives around the delayed message, want 1 (the one that finds the queue drained)", empty)
		}
	})
}
