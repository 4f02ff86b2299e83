package sharded

import (
	"context"
	"errors"

	"github.com/wqhost/wqhost/listener/queue"
)

// Scan, CountMatching and Sweep serve a queue of one shard with the shard's own. Over more
// shards they are withheld (Capabilities): a cursor would have to merge the shards' scan
// orders, and a caller that needs it over several shards takes the contract's fallback.

// Scan implements queue.Scanner over a single shard.
func (q *Queue) Scan(ctx context.Context, o queue.ScanOptions, fn func(m *queue.Message, size int64) error) (string, error) {
	s, ok := queue.As[queue.Scanner](q.shards[0])
	if !ok || len(q.shards) > 1 {
		return "", errors.ErrUnsupported
	}
	return s.Scan(ctx, o, fn)
}

// CountMatching implements queue.Scanner over a single shard.
func (q *Queue) CountMatching(ctx context.Context, f queue.Filter) (int64, error) {
	s, ok := queue.As[queue.Scanner](q.shards[0])
	if !ok || len(q.shards) > 1 {
		return 0, errors.ErrUnsupported
	}
	return s.CountMatching(ctx, f)
}

// Sweep implements queue.Sweeper over a single shard; a sharded destination of a move is
// resolved to its first shard, as MoveTo resolves shard i to shard i.
func (q *Queue) Sweep(ctx context.Context, f queue.Filter) (queue.Sweep, int64, error) {
	s, ok := queue.As[queue.Sweeper](q.shards[0])
	if !ok || len(q.shards) > 1 {
		return nil, 0, errors.ErrUnsupported
	}
	sw, n, err := s.Sweep(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	return shardSweep{sw}, n, nil
}

type shardSweep struct{ queue.Sweep }

func (s shardSweep) MoveTo(ctx context.Context, n int, dst queue.Queue, drop []string) (int, int, error) {
	if sd, ok := queue.Unwrap(dst).(*Queue); ok {
		dst = sd.shards[0]
	}
	return s.Sweep.MoveTo(ctx, n, dst, drop)
}
