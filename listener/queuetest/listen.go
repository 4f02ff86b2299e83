package queuetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// runListener starts a polling listener on b's queue name with h and the given changes to
// its config; it stops in cleanup.
func runListener(t *testing.T, b queue.Backend, name string, h listener.HandlerFunc, edit func(*listener.Config)) (*listener.Listener, queue.Queue, queue.Queue) {
	t.Helper()
	q, dl := open(t, b, name), open(t, b, name+queue.PoisonSuffix)
	cfg := listener.Config{
		Queue: q, DeadLetter: dl, Handler: h,
		Backoff: idleBackoff{}, Scaler: depthScaler{}, Poison: retryPoison{delay: 10 * time.Millisecond},
		// A backend on a fake clock does not wake the listener when a delay ends: poll.
		MinIdle: 50 * time.Millisecond, MaxIdle: 50 * time.Millisecond,
		MaxWorkers: 2,
		Logger:     testLogger(),
	}
	if edit != nil {
		edit(&cfg)
	}
	l, err := listener.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := l.Start(ctx)
	t.Cleanup(func() {
		cancel()
		if err := wait(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return l, q, dl
}

// await polls cond for up to a minute, advancing a fake clock as it goes.
func await(t *testing.T, l *listener.Listener, advance func(time.Duration), what string, cond func(listener.State) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for s := l.State(); !cond(s); s = l.State() {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, not %s: %+v", what, s)
		}
		if advance != nil {
			advance(100 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deadLetter returns the single dead letter of dl, failing if there are others.
func deadLetter(t *testing.T, dl queue.Queue) *queue.Message {
	t.Helper()
	d := receiveOne(t, dl, time.Minute)
	expectEmpty(t, dl)
	return d
}

// testListenerRetryAfter: a handler's retry-after redelivers the message after its delay.
func testListenerRetryAfter(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	var calls atomic.Int32
	var sentAt time.Time
	var second atomic.Int64
	l, q, _ := runListener(t, b, "retry-after", func(_ context.Context, m *queue.Message) error {
		if calls.Add(1) == 1 {
			return outcome.Retry(time.Second, errors.New("later"))
		}
		second.Store(int64(m.DequeueCount))
		return nil
	}, nil)
	sentAt = time.Now()
	send(t, q, []byte("r"), queue.SendOptions{})
	await(t, l, advance, "processed after a retry", func(s listener.State) bool { return s.Processed == 1 })
	if advance == nil && time.Since(sentAt) < 900*time.Millisecond {
		t.Fatalf("retried after %s, before the 1s asked for", time.Since(sentAt))
	}
	if calls.Load() != 2 || second.Load() != 2 {
		t.Fatalf("calls %d, second dequeue count %d; want 2 and 2", calls.Load(), second.Load())
	}
}

// testListenerReject: a rejected message is dead-lettered once, at once, with its reason and
// the listener's metadata, and leaves its queue.
func testListenerReject(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	var id string
	l, q, dl := runListener(t, b, "reject", func(_ context.Context, m *queue.Message) error {
		id = m.ID
		return outcome.Reject(errors.New("bad input"))
	}, nil)
	send(t, q, []byte("poison"), queue.SendOptions{Attributes: map[string]string{"k": "v"}})
	await(t, l, advance, "poisoned", func(s listener.State) bool { return s.Poisoned == 1 })
	d := deadLetter(t, dl)
	a := d.Attributes
	if string(d.Body) != "poison" || !strings.Contains(a[queue.AttrReason], "bad input") ||
		a[queue.AttrOriginalID] != id || a[queue.AttrOriginalQueue] != q.Name() || a[queue.AttrDequeueCount] != "1" ||
		a[queue.AttrDeadLetteredAt] == "" || a["k"] != "v" {
		t.Fatalf("dead letter %q with attributes %v", d.Body, a)
	}
	if dep, err := q.Depth(context.Background()); err != nil || dep != 0 {
		t.Fatalf("queue depth after dead-lettering = %d, %v", dep, err)
	}
}

// testListenerMaxDequeue: a message that always fails is dead-lettered at MaxDequeueCount.
func testListenerMaxDequeue(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	var calls atomic.Int32
	l, q, dl := runListener(t, b, "maxdequeue", func(context.Context, *queue.Message) error {
		calls.Add(1)
		return errors.New("boom")
	}, func(c *listener.Config) { c.MaxDequeueCount = 3 })
	send(t, q, []byte("x"), queue.SendOptions{})
	await(t, l, advance, "poisoned", func(s listener.State) bool { return s.Poisoned == 1 })
	d := deadLetter(t, dl)
	if calls.Load() != 3 || d.Attributes[queue.AttrDequeueCount] != "3" || !strings.Contains(d.Attributes[queue.AttrReason], "boom") {
		t.Fatalf("%d calls, dead letter attributes %v; want 3 calls and reason boom", calls.Load(), d.Attributes)
	}
}

// testListenerRenews: a call longer than the visibility timeout keeps its lease (renewed),
// so the message is handled once.
func testListenerRenews(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	var calls atomic.Int32
	l, q, _ := runListener(t, b, "renew", func(context.Context, *queue.Message) error {
		calls.Add(1)
		for range 10 { // 5 s, each half second of it on the backend's clock too: renewed twice
			if advance != nil {
				advance(500 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond)
		}
		return nil
	}, func(c *listener.Config) { c.VisibilityTimeout = 3 * time.Second })
	send(t, q, []byte("slow"), queue.SendOptions{})
	await(t, l, nil, "processed", func(s listener.State) bool { return s.Processed == 1 })
	if n := calls.Load(); n != 1 {
		t.Fatalf("a renewed message was handled %d times", n)
	}
}

// testListenerDrains: every handled message is deleted.
func testListenerDrains(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	l, q, _ := runListener(t, b, "drain", func(context.Context, *queue.Message) error { return nil }, nil)
	for i := range 50 {
		send(t, q, []byte{byte(i)}, queue.SendOptions{})
	}
	await(t, l, advance, "all processed", func(s listener.State) bool { return s.Processed == 50 })
	if d, err := q.Depth(context.Background()); err != nil || d != 0 {
		t.Fatalf("depth after draining = %d, %v", d, err)
	}
}

// testListenerOversize: a body above MaxMessageBytes is dead-lettered whole with its size in
// the reason and never handed to the handler; a smaller one is handled.
func testListenerOversize(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	var bigSeen atomic.Bool
	l, q, dl := runListener(t, b, "oversize", func(_ context.Context, m *queue.Message) error {
		if len(m.Body) > 100 {
			bigSeen.Store(true)
		}
		return nil
	}, func(c *listener.Config) { c.MaxMessageBytes = 100 })
	big := bytes.Repeat([]byte("z"), 1000)
	send(t, q, big, queue.SendOptions{})
	send(t, q, []byte("small"), queue.SendOptions{})
	await(t, l, advance, "one processed, one poisoned", func(s listener.State) bool { return s.Processed == 1 && s.Poisoned == 1 })
	d := deadLetter(t, dl)
	if bigSeen.Load() || !bytes.Equal(d.Body, big) || !strings.Contains(d.Attributes[queue.AttrReason], "1000 bytes exceeds max_message_bytes 100") {
		t.Fatalf("handler saw the big body: %v; dead letter %d bytes, reason %q", bigSeen.Load(), len(d.Body), d.Attributes[queue.AttrReason])
	}
}

// testListenerPushPolls: without wake-ups an idle push listener still takes a new message, at
// its fallback poll.
func testListenerPushPolls(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	l, q, _ := runListener(t, b, "push-poll", func(context.Context, *queue.Message) error { return nil }, func(c *listener.Config) {
		c.Push, c.PushFallbackPoll, c.MinWorkers, c.MaxWorkers = true, 200*time.Millisecond, 0, 1
	})
	time.Sleep(300 * time.Millisecond) // idle
	send(t, q, []byte("wake"), queue.SendOptions{})
	await(t, l, nil, "processed by the fallback poll", func(s listener.State) bool { return s.Processed == 1 })
}

// testOrderedRefused: ordered mode on a queue without ordered receive fails naming it.
func testOrderedRefused(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q := open(t, b, "unordered")
	_, err := listener.New(listener.Config{
		Queue: q, Ordered: true, DeadLetter: q, Backoff: idleBackoff{}, Scaler: depthScaler{}, Poison: retryPoison{},
		Handler: listener.HandlerFunc(func(context.Context, *queue.Message) error { return nil }),
	})
	if err == nil || !strings.Contains(err.Error(), `"unordered"`) {
		t.Fatalf("ordered mode on a queue without ordered receive = %v, want an error naming it", err)
	}
}

// testCrashRecovery: after a crash, unsettled leased messages come back once their lease
// ends (dequeue count kept), and the others are there at once.
func testCrashRecovery(t *testing.T, b queue.Backend, advance func(time.Duration), reopen func(*testing.T, queue.Backend) queue.Backend) {
	q := open(t, b, "crash")
	for _, s := range []string{"a", "b", "c"} {
		send(t, q, []byte(s), queue.SendOptions{})
	}
	leased := receive(t, q, 2, 2*time.Second)
	if len(leased) != 2 {
		t.Fatalf("leased %d of 2", len(leased))
	}
	b = reopen(t, b)
	q = open(t, b, "crash")
	if ms := receive(t, q, queue.MaxBatch, time.Minute); len(ms) != 1 {
		t.Fatalf("after the crash %d messages visible, want the 1 unleased", len(ms))
	}
	if advance != nil {
		advance(3 * time.Second)
	} else {
		time.Sleep(3 * time.Second)
	}
	back := receive(t, q, queue.MaxBatch, time.Minute)
	if len(back) != 2 {
		t.Fatalf("after the leases ran out %d messages came back, want 2", len(back))
	}
	for _, m := range back {
		if m.DequeueCount != 2 {
			t.Fatalf("message %s came back with dequeue count %d, want 2", m.ID, m.DequeueCount)
		}
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("QUEUETEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
