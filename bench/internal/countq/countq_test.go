package countq

import (
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

// plain hides the memory queue's Batcher and Waiter.
type plain struct{ queue.Queue }

func TestWrapKeepsCapabilities(t *testing.T) {
	ctx := context.Background()
	mq, err := memory.New(memory.Options{}).Open(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		q           queue.Queue
		batch, wait bool
	}{
		{"memory", mq, true, true},
		{"plain", plain{mq}, false, false},
	}
	for _, tc := range tests {
		w := Wrap(tc.q, &Counts{})
		_, b := queue.As[queue.Batcher](w)
		_, wt := queue.As[queue.Waiter](w)
		if got, want := queue.Of(w), queue.Of(tc.q); got != want {
			t.Errorf("%s: wrapped capabilities %s, want the queue's %s", tc.name, got, want)
		}
		if b != tc.batch || wt != tc.wait {
			t.Errorf("%s: Batcher %v Waiter %v, want %v %v", tc.name, b, wt, tc.batch, tc.wait)
		}
	}
}

func TestCounts(t *testing.T) {
	ctx := context.Background()
	mq, err := memory.New(memory.Options{}).Open(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	var c Counts
	q := Wrap(mq, &c)
	if ms, err := q.Receive(ctx, 1, time.Second); err != nil || len(ms) != 0 {
		t.Fatal(ms, err)
	}
	for range 3 {
		if _, err := q.Send(ctx, []byte("x"), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := q.Receive(ctx, 32, time.Minute)
	if err != nil || len(ms) != 3 {
		t.Fatal(len(ms), err)
	}
	if err := q.Delete(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
	if errs := q.(queue.Batcher).DeleteBatch(ctx, ms[1:]); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if _, err := q.Depth(ctx); err != nil {
		t.Fatal(err)
	}
	_ = q.(queue.Waiter).Wait(ctx, time.Millisecond)
	got := c.Snapshot()
	want := Snapshot{Receive: 2, EmptyReceive: 1, Delete: 1, DeleteBatch: 1, Send: 3, Depth: 1, Wait: 1, Received: 3, Transactions: 8}
	if got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if d := got.Sub(Snapshot{Receive: 1, Transactions: 1}); d.Receive != 1 || d.Transactions != 7 {
		t.Errorf("Sub: %+v", d)
	}
}
