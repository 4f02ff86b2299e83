package listener_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// dormantEnv is one idle push listener at MinWorkers 1 on a memory queue made into a Queue by
// wrap, that holds no goroutine once idle (checked). It must be made inside a bubble.
func dormantEnv(t *testing.T, wrap func(*memory.Queue) queue.Queue, edit func(*listener.Config)) (*memory.Queue, *running, func(string)) {
	t.Helper()
	before := listenerGoroutines()
	_, qs, ls := pushEnv(t, 1, wrap, func(c *listener.Config) {
		c.MinWorkers = 1
		edit(c)
	})
	dormant := func(when string) {
		t.Helper()
		synctest.Wait()
		if got := listenerGoroutines() - before; got != 0 {
			t.Fatalf("%s: %d goroutines in listener code for an idle push listener, want 0", when, got)
		}
	}
	time.Sleep(time.Second)
	dormant("after start")
	return qs[0], ls[0], dormant
}

func sendOne(t *testing.T, q queue.Queue) {
	t.Helper()
	if _, err := q.Send(context.Background(), []byte("m"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
}

func plain(q *memory.Queue) queue.Queue      { return q }
func notifyOnly(q *memory.Queue) queue.Queue { return &spyQueue{Queue: q} }

// TestDormantNotifyWakes: Notify wakes a dormant listener at once, even with nothing to
// receive; the receive that finds nothing is a spurious wake-up, so the next Notify is held
// back for MinIdle (its receive then comes, not lost), and the listener is dormant again
// after each.
func TestDormantNotifyWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, l, dormant := dormantEnv(t, plain, func(c *listener.Config) { c.MinIdle = time.Second })
		receives := func() uint64 { return l.State().Receives }
		r0 := receives()
		l.Notify()
		dormant("after a Notify")
		if got := receives() - r0; got != 1 {
			t.Fatalf("%d receives right after a Notify, want 1", got)
		}
		l.Notify()
		time.Sleep(time.Second - time.Millisecond)
		dormant("while a Notify is held back")
		if got := receives() - r0; got != 1 {
			t.Fatalf("%d receives within MinIdle of a spurious wake-up, want 1 (the next Notify held back)", got)
		}
		time.Sleep(time.Millisecond)
		dormant("after the held-back Notify")
		if got := receives() - r0; got != 2 {
			t.Fatalf("%d receives once MinIdle passed, want 2 (the held-back Notify served)", got)
		}
	})
}

// TestDormantWakeUps: a dormant listener is woken by each of its wake-ups, and holds no
// goroutine again after it: a send on a queue that calls back, a retry it scheduled on a
// queue that cannot tell it (Notify only), and the push fallback poll for a message sent
// with no Notify.
func TestDormantWakeUps(t *testing.T) {
	for _, tt := range []struct {
		name    string
		wrap    func(*memory.Queue) queue.Queue
		retry   time.Duration // the handler asks for one retry this late
		notify  bool          // the send is followed by Notify
		early   time.Duration // this long after the send
		atEarly int32         // the handler was called this many times
		then    time.Duration // and this much later
		want    int32         // this many
	}{
		{"send wakes", plain, 0, false, 0, 1, 0, 1},
		{"own retry wakes", notifyOnly, 20 * time.Millisecond, true, 20*time.Millisecond - time.Nanosecond, 1, time.Nanosecond, 2},
		// The poll is due 5 minutes after the receive at start, a second before the send.
		{"fallback poll", notifyOnly, 0, false, 5*time.Minute - time.Second - time.Millisecond, 0, time.Millisecond, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				q, l, dormant := dormantEnv(t, tt.wrap, func(c *listener.Config) {
					c.MinIdle, c.MaxIdle = 30*time.Second, time.Minute
					c.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
						if calls.Add(1) == 1 && tt.retry > 0 {
							return outcome.Retry(tt.retry, errors.New("once more"))
						}
						return nil
					})
				})
				sendOne(t, q)
				if tt.notify {
					l.Notify()
				}
				time.Sleep(tt.early)
				dormant("before the wake-up")
				if got := calls.Load(); got != tt.atEarly {
					t.Fatalf("%d handler calls %s after the send, want %d", got, tt.early, tt.atEarly)
				}
				time.Sleep(tt.then)
				dormant("after the wake-up")
				if got := calls.Load(); got != tt.want {
					t.Fatalf("%d handler calls %s after the send, want %d", got, tt.early+tt.then, tt.want)
				}
			})
		})
	}
}

// TestDormantListenersStop: dormant listeners stop as soon as their context ends, with no
// time passing: Done is closed, wait returns nil, and no goroutine is left in listener code.
func TestDormantListenersStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		before := listenerGoroutines()
		_, _, ls := pushEnv(t, n, plain, func(c *listener.Config) { c.MinWorkers = 1 })
		time.Sleep(time.Second)
		synctest.Wait()
		for _, l := range ls {
			l.cancel()
		}
		synctest.Wait()
		for i, l := range ls {
			select {
			case <-l.Done():
			default:
				t.Fatalf("listener %d not stopped once its context ended", i)
			}
			if err := l.wait(); err != nil {
				t.Errorf("listener %d: %v", i, err)
			}
		}
		if got := listenerGoroutines() - before; got != 0 {
			t.Errorf("%d goroutines left in listener code after stopping", got)
		}
	})
}
