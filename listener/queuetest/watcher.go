package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// lostWakeUp bounds the wait for a channel that a write should have closed: only a lost
// wake-up gets near it.
const lostWakeUp = 10 * time.Second

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// watchVia is one way a consumer watches a queue, as Watcher.Watch reports it; ok is false
// when the queue does not offer it.
type watchVia func(q queue.Queue) (w func(ctx context.Context) (<-chan struct{}, time.Duration, func(), error), ok bool)

// byChan watches with Watcher.
func byChan(q queue.Queue) (func(context.Context) (<-chan struct{}, time.Duration, func(), error), bool) {
	w, ok := queue.As[queue.Watcher](q)
	if !ok {
		return nil, false
	}
	return w.Watch, true
}

// byFunc watches with FuncWatcher, whose callback closes a channel: a second call panics.
func byFunc(q queue.Queue) (func(context.Context) (<-chan struct{}, time.Duration, func(), error), bool) {
	w, ok := queue.As[queue.FuncWatcher](q)
	if !ok {
		return nil, false
	}
	return func(ctx context.Context) (<-chan struct{}, time.Duration, func(), error) {
		ch := make(chan struct{})
		in, stop, err := w.WatchFunc(ctx, func() { close(ch) })
		return ch, in, stop, err
	}, true
}

// watchers runs test watching the queue through via.
func watchers(via watchVia, test func(t *testing.T, b queue.Backend, advance func(time.Duration), via watchVia)) func(*testing.T, queue.Backend, func(time.Duration)) {
	return func(t *testing.T, b queue.Backend, advance func(time.Duration)) { test(t, b, advance, via) }
}

func watch(t *testing.T, w func(context.Context) (<-chan struct{}, time.Duration, func(), error)) (<-chan struct{}, time.Duration, func()) {
	t.Helper()
	ch, in, stop, err := w(context.Background())
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return ch, in, stop
}

// testWatcher: Watch reports an empty queue as -1 (only a write helps), a delayed message as
// not visible yet, a visible one as 0; a Send closes the channel of a Watch taken before it
// (calls back a WatchFunc registered before it).
func testWatcher(t *testing.T, b queue.Backend, advance func(time.Duration), via watchVia) {
	q := open(t, b, "watcher")
	w, _ := via(q)
	ch, in, stop := watch(t, w)
	if in != -1 || isClosed(ch) {
		t.Fatalf("Watch on an empty queue: visibleIn %s, channel closed %v; want -1 and open", in, isClosed(ch))
	}
	const delay = time.Hour
	send(t, q, []byte("later"), queue.SendOptions{Delay: delay})
	if !isClosed(ch) {
		t.Fatal("Send did not close the channel of a Watch taken before it")
	}
	stop()
	ch, in, stop = watch(t, w)
	switch {
	case advance != nil && in != -1:
		// An injected clock arms no timer: Backend.Notify after advancing it wakes the watch.
		t.Fatalf("Watch with a message delayed %s (injected clock): visibleIn %s, want -1", delay, in)
	case advance == nil && (in <= 0 || in > delay):
		t.Fatalf("Watch with a message delayed %s: visibleIn %s, want in (0, %s]", delay, in, delay)
	case isClosed(ch):
		t.Fatal("the channel of a Watch taken after the last write is closed")
	}
	stop()
	if advance != nil {
		advance(delay)
		if _, in, stop = watch(t, w); in != 0 {
			t.Fatalf("Watch once the delayed message is due: visibleIn %s, want 0", in)
		}
		stop()
		receiveOne(t, q, time.Hour)
	}
	send(t, q, []byte("now"), queue.SendOptions{})
	if _, in, stop = watch(t, w); in != 0 {
		t.Fatalf("Watch with a visible message: visibleIn %s, want 0", in)
	}
	stop()
}

// testWatcherNoLostWakeUp: a consumer that watches, then waits on the channel when nothing
// is visible, receives every message of a producer that sends one each time the consumer is
// about to watch, racing the Watch. A send that lands between the channel being taken and the
// visibility being read must still close the channel, or the consumer waits for lostWakeUp
// and fails.
func testWatcherNoLostWakeUp(t *testing.T, b queue.Backend, _ func(time.Duration), via watchVia) {
	q := open(t, b, "watcher-race")
	w, _ := via(q)
	const n = 200
	ctx, cancel := context.WithCancel(context.Background())
	poke := make(chan struct{}, 1) // a send is due
	done := make(chan struct{})
	defer func() {
		cancel()
		<-done
	}()
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-poke:
			}
			if _, err := q.Send(ctx, []byte("m"), queue.SendOptions{}); err != nil && ctx.Err() == nil {
				t.Errorf("Send: %v", err)
			}
		}
	}()
	for got := 0; got < n; {
		select {
		case poke <- struct{}{}:
		default: // one is due already
		}
		ch, in, stop, err := w(ctx)
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		if in != 0 {
			select {
			case <-ch:
			case <-time.After(lostWakeUp):
				stop()
				t.Fatalf("lost wake-up: the send due after %d of %d messages did not close the channel within %s (visibleIn %s)", got, n, lostWakeUp, in)
			}
			stop()
			continue
		}
		stop()
		ms := receive(t, q, queue.MaxBatch, time.Hour)
		got += len(ms)
		for _, m := range ms {
			if err := q.Delete(ctx, m); err != nil {
				t.Fatalf("Delete %s: %v", m.ID, err)
			}
		}
	}
}
