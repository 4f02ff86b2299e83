package sharded

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

func TestShardedRoutesAndDrains(t *testing.T) {
	ctx := context.Background()
	b := memory.New(memory.Options{})
	var shards []queue.Queue
	for i := range 4 {
		s, err := b.Open(ctx, fmt.Sprintf("orders-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, s)
	}
	q, err := New("orders", shards, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := q.Send(ctx, []byte(fmt.Sprint(i)), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := q.ShardDepths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if d != 10 {
			t.Fatalf("shard %d depth %d, want 10 (send spreads evenly)", i, d)
		}
	}
	seen := map[string]bool{}
	for len(seen) < 40 {
		ms, err := q.Receive(ctx, 32, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			t.Fatalf("empty receive with %d of 40 seen", len(seen))
		}
		for _, m := range ms {
			if err := q.UpdateVisibility(ctx, m, time.Minute); err != nil {
				t.Fatalf("renew routed to %q: %v", m.Queue, err)
			}
			if err := q.Delete(ctx, m); err != nil {
				t.Fatalf("delete routed to %q: %v", m.Queue, err)
			}
			seen[m.Queue+"/"+m.ID] = true
		}
	}
	if d, err := q.Depth(ctx); err != nil || d != 0 {
		t.Fatalf("depth after drain = %d, %v; want 0", d, err)
	}
}

// Runs in a synctest bubble: its clock advances the depth refresh, and the leases taken
// (an hour) outlive the test's fake 1100 seconds, so no message is redelivered.
func TestShardedFavoursDeepestAndDoesNotStarve(t *testing.T) {
	synctest.Test(t, testFavoursDeepest)
}

func testFavoursDeepest(t *testing.T) {
	ctx := context.Background()
	b := memory.New(memory.Options{})
	var shards []queue.Queue
	for i := range 3 {
		s, err := b.Open(ctx, fmt.Sprintf("s-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, s)
	}
	for i := range 100 {
		if _, err := shards[2].Send(ctx, []byte(fmt.Sprint(i)), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := shards[0].Send(ctx, []byte("small"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	q, err := New("s", shards, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := q.Receive(ctx, 1, time.Hour)
	if err != nil || len(ms) != 1 || ms[0].Queue != "s-2" {
		t.Fatalf("first receive = %v, %v; want one message from the deepest shard s-2", ms, err)
	}
	// Shard s-0 must be reached even while s-2 stays deeper: it is tried once s-2 has been
	// found empty, and a refresh (clock advanced) sees its real depth.
	got := map[string]int{}
	for range 110 {
		time.Sleep(10 * time.Second) // past the 5 s depth refresh
		ms, err := q.Receive(ctx, 1, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			got[m.Queue]++
		}
	}
	if got["s-0"] != 1 || got["s-2"] != 99 {
		t.Fatalf("received per shard %v; want s-0:1 s-2:99", got)
	}
}
