package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/nats/natstest"
	"github.com/wqhost/wqhost/listener/queue"
)

// Counts splits the depth: a leased message and one waiting for its retry are leased, the
// delayed sends a receive pulled early and sent back are delayed, the rest visible; the
// parts add up to Depth.
func TestCountsSplitDepth(t *testing.T) {
	_, url := natstest.Server(t)
	b := open(t, url, nil)
	ctx := context.Background()
	q, err := b.Queue(ctx, "counts")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"leased", "retry"} {
		if _, err := q.Send(ctx, []byte(s), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := q.Send(ctx, []byte("delayed"), queue.SendOptions{Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	var got []*queue.Message
	for range 50 {
		ms, err := q.Receive(ctx, queue.MaxBatch, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
		if len(got) >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 2 {
		t.Fatalf("received %d messages, want the 2 not delayed", len(got))
	}
	for _, m := range got {
		if string(m.Body) == "retry" {
			if err := q.UpdateVisibility(ctx, m, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := q.Send(ctx, []byte("visible"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	want := queue.Counts{Visible: 1, Leased: 2, Delayed: 2}
	var c queue.Counts
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err = q.Counts(ctx); err == nil && c == want {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if c != want {
		t.Fatalf("Counts = %+v, %v; want %+v", c, err, want)
	}
	if d, err := q.Depth(ctx); err != nil || d != 5 {
		t.Fatalf("Depth = %d, %v; want 5, the sum of the counts", d, err)
	}
}
