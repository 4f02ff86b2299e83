package queuetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/listener/sharded"
)

// Sharded returns s over a sharded wrapper: each queue name opens as a sharded.Queue over n
// queues of s's backend (name-0 … name-(n-1)). A wrapper must pass what its backend passes.
func Sharded(s Suite, n int) Suite {
	out := Suite{
		Name: fmt.Sprintf("sharded(%s×%d)", s.Name, n),
		Skip: map[string]string{"ReleaseReturnsToHead": "a released message returns to the head of its shard; the next receive may start at another shard"},
		New: func(t *testing.T) (queue.Backend, func(time.Duration)) {
			b, advance := s.New(t)
			return shardedBackend{b, n}, advance
		},
	}
	if s.Reopen != nil {
		out.Reopen = func(t *testing.T, b queue.Backend) queue.Backend {
			return shardedBackend{s.Reopen(t, b.(shardedBackend).Backend), n}
		}
	}
	return out
}

type shardedBackend struct {
	queue.Backend
	n int
}

func (b shardedBackend) Open(ctx context.Context, name string) (queue.Queue, error) {
	shards := make([]queue.Queue, b.n)
	for i := range shards {
		q, err := b.Backend.Open(ctx, fmt.Sprintf("%s-%d", name, i))
		if err != nil {
			return nil, err
		}
		shards[i] = q
	}
	return sharded.New(name, shards, sharded.Options{})
}
