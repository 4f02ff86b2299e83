package queuetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
)

// testReleaser: a released lease is not a delivery: the message comes back with the
// dequeue count it had before, while a release by UpdateVisibility(0) counts.
func testReleaser(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "releaser")
	r, ok := queue.As[queue.Releaser](q)
	if !ok {
		t.Fatal("the queue advertises release but is no Releaser")
	}
	send(t, q, []byte("x"), queue.SendOptions{Attributes: map[string]string{"k": "v"}})
	m := receiveOne(t, q, time.Minute)
	if m.DequeueCount != 1 {
		t.Fatalf("first receive: DequeueCount %d, want 1", m.DequeueCount)
	}
	for range 3 {
		if err := r.Release(ctx, m); err != nil {
			t.Fatalf("Release: %v", err)
		}
		m = receiveOne(t, q, time.Minute)
		if m.DequeueCount != 1 || string(m.Body) != "x" || m.Attributes["k"] != "v" {
			t.Fatalf("after Release: DequeueCount %d, body %q, attributes %v; want 1, x and k=v", m.DequeueCount, m.Body, m.Attributes)
		}
	}
	if err := q.UpdateVisibility(ctx, m, 0); err != nil {
		t.Fatalf("UpdateVisibility(0): %v", err)
	}
	m = receiveOne(t, q, time.Minute)
	if m.DequeueCount != 2 {
		t.Fatalf("after UpdateVisibility(0): DequeueCount %d, want 2 (a retry counts)", m.DequeueCount)
	}
	if err := r.Release(ctx, m); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := r.Release(ctx, m); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("a second Release of the same lease: %v, want ErrLeaseLost", err)
	}
	if m = receiveOne(t, q, time.Minute); m.DequeueCount != 2 {
		t.Fatalf("after Release: DequeueCount %d, want 2 kept", m.DequeueCount)
	}
}

// testListenerStopKeepsCounts: messages a listener leased ahead of its handler and released
// unstarted when it stopped come back with their dequeue counts unraised, so a stop (a
// SIGTERM, a scale-in) does not push them toward poison: with max_dequeue_count 1 they are
// handled, not dead-lettered.
func testListenerStopKeepsCounts(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q, dl := open(t, b, "stopcounts"), open(t, b, "stopcounts"+queue.PoisonSuffix)
	const n = 6
	for i := range n {
		send(t, q, []byte{byte(i)}, queue.SendOptions{})
	}
	release := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	cfg := listener.Config{
		Queue: q, DeadLetter: dl,
		Handler: listener.HandlerFunc(func(ctx context.Context, _ *queue.Message) error {
			<-release
			return nil
		}),
		Backoff: idleBackoff{}, Scaler: depthScaler{}, Poison: retryPoison{delay: 10 * time.Millisecond},
		MinIdle: 50 * time.Millisecond, MaxIdle: 50 * time.Millisecond,
		MaxWorkers: 1, BatchSize: n, Concurrency: 1, HandlerSlots: 1, Prefetch: n - 1,
		Logger: testLogger(),
	}
	l, err := listener.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := l.Start(ctx)
	await(t, l, nil, "one handler running and the rest leased ahead", func(s listener.State) bool {
		return s.InFlight == 1 && s.Leased == n
	})
	cancel()
	// The stop is noted by a context.AfterFunc, in a goroutine of its own: let it run before
	// the handler returns, or the next message would start.
	time.Sleep(200 * time.Millisecond)
	close(release)
	if err := wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if s := l.State(); s.Released != n-1 || s.Processed != 1 {
		t.Fatalf("stopped with %d released and %d processed, want %d and 1", s.Released, s.Processed, n-1)
	}
	got := 0
	for deadline := time.Now().Add(30 * time.Second); got < n-1 && time.Now().Before(deadline); {
		for _, m := range receive(t, q, queue.MaxBatch, time.Minute) {
			got++
			if m.DequeueCount != 1 {
				t.Errorf("message %s released unstarted came back with DequeueCount %d, want 1 (its one receive)", m.ID, m.DequeueCount)
			}
		}
	}
	if got != n-1 {
		t.Fatalf("received %d of the %d released messages", got, n-1)
	}
}

// testOrderedRelease: a message of an order group released unstarted keeps its place at the
// head of its group and its dequeue count (on NATS JetStream its group's consumer redelivers
// it with NumDelivered raised: the release is counted beside the queue), while a release by
// UpdateVisibility(0) counts.
func testOrderedRelease(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "ordered")
	o, _ := queue.As[queue.OrderedReceiver](q)
	r, _ := queue.As[queue.Releaser](q)
	sendGroup(t, q, "g1-a", 1)
	sendGroup(t, q, "g1-b", 1)
	head := func(want string, dc int) *queue.Message {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			ms, _, err := o.ReceiveOrdered(ctx, 1, time.Minute, 0)
			if err != nil {
				t.Fatalf("ReceiveOrdered: %v", err)
			}
			if len(ms) == 1 {
				if m := ms[0]; string(m.Body) != want || m.DequeueCount != dc {
					t.Fatalf("ReceiveOrdered: %q with DequeueCount %d, want %q with %d", m.Body, m.DequeueCount, want, dc)
				}
				return ms[0]
			}
		}
		t.Fatalf("no ordered receive within 10s (want %q)", want)
		return nil
	}
	m := head("g1-a", 1)
	for range 3 {
		if err := r.Release(ctx, m); err != nil {
			t.Fatalf("Release: %v", err)
		}
		m = head("g1-a", 1)
	}
	if err := q.UpdateVisibility(ctx, m, 0); err != nil {
		t.Fatalf("UpdateVisibility(0): %v", err)
	}
	m = head("g1-a", 2)
	if err := q.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	head("g1-b", 1)
}
