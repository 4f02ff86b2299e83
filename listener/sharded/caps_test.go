package sharded

import (
	"context"
	"fmt"
	"testing"

	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

// stub has the methods of every capability and advertises caps.
type stub struct {
	queue.Decorator
	caps queue.Caps
}

func (s stub) Capabilities() queue.Caps { return s.caps }

func stubs(t *testing.T, caps ...queue.Caps) []queue.Queue {
	t.Helper()
	b := memory.New(memory.Options{})
	var out []queue.Queue
	for i, c := range caps {
		q, err := b.Open(context.Background(), fmt.Sprintf("s-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stub{queue.Decorator{Queue: q}, c})
	}
	return out
}

// TestShardedForwardsEveryCapability walks the contract's capabilities: a sharded queue has
// each one its shards all have, and loses it when one shard lacks it. A capability added to
// the contract without its forwarding here fails the first check.
func TestShardedForwardsEveryCapability(t *testing.T) {
	for c := queue.Caps(1); c&queue.CapAll != 0; c <<= 1 {
		t.Run(c.String(), func(t *testing.T) {
			shards := 2
			if c == queue.CapOrdered || c == queue.CapScan || c == queue.CapSweep {
				shards = 1 // order groups and scan cursors span shards: forwarded over one shard only
			}
			all := make([]queue.Caps, shards)
			for i := range all {
				all[i] = queue.CapAll
			}
			q, err := New("s", stubs(t, all...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if queue.Of(q)&c == 0 {
				t.Fatalf("sharded over shards that all have %s does not advertise it (has %s)", c, queue.Of(q))
			}
			all[0] = queue.CapAll &^ c
			q, err = New("s", stubs(t, all...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := asCap(q, c); ok || queue.Of(q)&c != 0 {
				t.Fatalf("sharded advertises %s that a shard lacks", c)
			}
		})
	}
}

// TestShardedOrderedNeedsOneShard: over several shards no order spans them, nor does a
// scan's cursor or a sweep's snapshot.
func TestShardedOrderedNeedsOneShard(t *testing.T) {
	q, err := New("s", stubs(t, queue.CapAll, queue.CapAll), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := queue.As[queue.OrderedReceiver](q); ok {
		t.Fatal("sharded over two shards offers ordered receive")
	}
	if c := queue.Of(q) & (queue.CapScan | queue.CapSweep); c != 0 {
		t.Fatalf("sharded over two shards offers %s", c)
	}
}

// asCap is queue.As for the capability bit c.
func asCap(q queue.Queue, c queue.Caps) (any, bool) {
	switch c {
	case queue.CapBatch:
		return queue.As[queue.Batcher](q)
	case queue.CapBodyLimit:
		return queue.As[queue.BodyLimiter](q)
	case queue.CapWait:
		return queue.As[queue.Waiter](q)
	case queue.CapWatch:
		return queue.As[queue.Watcher](q)
	case queue.CapWatchFunc:
		return queue.As[queue.FuncWatcher](q)
	case queue.CapMove:
		return queue.As[queue.Mover](q)
	case queue.CapRenew:
		return queue.As[queue.Renewer](q)
	case queue.CapOrdered:
		return queue.As[queue.OrderedReceiver](q)
	case queue.CapPeek:
		return queue.As[queue.Peeker](q)
	case queue.CapCount:
		return queue.As[queue.Counter](q)
	case queue.CapMaxBytes:
		return queue.As[queue.MessageLimiter](q)
	case queue.CapRelease:
		return queue.As[queue.Releaser](q)
	case queue.CapScan:
		return queue.As[queue.Scanner](q)
	case queue.CapSweep:
		return queue.As[queue.Sweeper](q)
	}
	return nil, false
}
