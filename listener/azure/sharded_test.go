package azure_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/listener/sharded"
)

// Shards on Azure (listener/sharded over Azure queues, as a binding with shards: runs):
// the deepest shard is drained first and each shard's calls are counted on it.
func TestSharded(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64)
	var shards []*azure.Queue
	var qs []queue.Queue
	for i := range 4 {
		q, err := b.Queue(ctx, "shard-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		shards, qs = append(shards, q), append(qs, q)
	}
	sq, err := sharded.New("shard", qs, sharded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// shard-2 is the deepest: it must be drained first.
	for i, n := range []int{1, 0, 5, 2} {
		q := shards[i]
		for j := 0; j < n; j++ {
			if _, err := q.Send(ctx, []byte(q.Name()), queue.SendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d, err := sq.Depth(ctx); err != nil || d != 8 {
		t.Fatalf("total Depth = %d, %v; want 8", d, err)
	}
	// One receive of 32 takes the deepest shard's 5 first, then fills up from the others.
	ms, err := sq.Receive(ctx, 32, time.Minute)
	if err != nil || len(ms) != 8 {
		t.Fatalf("first Receive: %d messages, %v; want all 8", len(ms), err)
	}
	for i, m := range ms[:5] {
		if m.Queue != "shard-2" {
			t.Fatalf("message %d of the receive came from %s, want the deepest shard-2 first", i, m.Queue)
		}
	}
	for _, m := range ms {
		if err := sq.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if st := shards[2].Stats(); st.Receive != 1 {
		t.Fatalf("shard-2 stats %+v, want 1 receive", st)
	}
	for i, want := range []int{1, 0, 5, 2} {
		if st := shards[i].Stats(); st.Delete != uint64(want) {
			t.Fatalf("shard-%d stats %+v, want %d deletes (each message settled on its own shard)", i, st, want)
		}
	}
}
