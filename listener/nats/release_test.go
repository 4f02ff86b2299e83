package nats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/nats/natstest"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestReleaseKeepsDequeueCount: a message released unstarted comes back with the dequeue
// count it had (JetStream's NumDelivered is not lowered: Release stores a copy that carries
// the count), its body and attributes kept and the original gone; a retry by
// UpdateVisibility(0) still counts. (An order group's message is released in place:
// TestOrderedReleaseKeepsDequeueCount.)
func TestReleaseKeepsDequeueCount(t *testing.T) {
	_, url := natstest.Server(t)
	b := open(t, url, nil)
	ctx := context.Background()
	q, err := b.Queue(ctx, "rel")
	if err != nil {
		t.Fatal(err)
	}
	r, ok := queue.As[queue.Releaser](q)
	if !ok {
		t.Fatal("the nats queue is no Releaser")
	}
	if _, err := q.Send(ctx, []byte("body"), queue.SendOptions{Attributes: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	receiveOne := func() *queue.Message {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			ms, err := q.Receive(ctx, 1, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 1 {
				return ms[0]
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("no message within 10s")
		return nil
	}
	m := receiveOne()
	for range 3 {
		if err := r.Release(ctx, m); err != nil {
			t.Fatalf("Release: %v", err)
		}
		m = receiveOne()
		if m.DequeueCount != 1 || string(m.Body) != "body" || m.Attributes["k"] != "v" {
			t.Fatalf("after Release: DequeueCount %d, body %q, attributes %v; want 1, body, k=v", m.DequeueCount, m.Body, m.Attributes)
		}
	}
	if err := q.UpdateVisibility(ctx, m, 0); err != nil {
		t.Fatal(err)
	}
	if m = receiveOne(); m.DequeueCount != 2 {
		t.Fatalf("after a retry: DequeueCount %d, want 2", m.DequeueCount)
	}
	if err := r.Release(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(ctx, m); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("a second Release of one lease: %v, want ErrLeaseLost", err)
	}
	if m = receiveOne(); m.DequeueCount != 2 {
		t.Fatalf("after Release: DequeueCount %d, want 2 kept", m.DequeueCount)
	}
	if err := q.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Depth(ctx); err != nil || d != 0 {
		t.Fatalf("depth after deleting the one message = %d, %v; want 0 (no original left behind)", d, err)
	}
}
