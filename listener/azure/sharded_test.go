package azure_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/sharded"
)

// Shards on Azure (listener/sharded over Azure queues, as a binding with shards: runs):
// the deepest shard is drained first and each shard's calls are counted on it.
func TestSharded(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64)
	var shards []*azure.Queue
	var qs []listener.Queue
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
			if _, err := q.Send(ctx, []byte(q.Name()), listener.SendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d, err := sq.Depth(ctx); err != nil || d != 8 {
		t.Fatalf("total Depth = %d, %v; want 8", d, err)
	}
	ms, err := sq.Receive(ctx, 32, time.Minute)
	if err != nil || len(ms) != 5 || ms[0].Queue != "shard-2" {
		t.Fatalf("first Receive: %d messages from %v, %v; want the 5 of shard-2", len(ms), ms, err)
	}
	for _, m := range ms {
		if err := sq.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if st := shards[2].Stats(); st.Receive != 1 || st.Delete != 5 {
		t.Fatalf("shard-2 stats %+v, want 1 receive and 5 deletes", st)
	}
	if st := shards[0].Stats(); st.Receive != 0 {
		t.Fatalf("shard-0 stats %+v, want no receive (shard-2 was deeper)", st)
	}
}
