// Package sharded composes several queue.Queues (orders-0..orders-N) into one Queue so a
// hot logical queue can exceed the throughput limit of a single storage queue.
//
// A sharded Queue provides every capability of the contract (listener/queue) that all its
// shards provide, and no other. It does so by construction with one concrete type: Queue
// has the methods of every capability and implements queue.Advertiser, whose Capabilities
// is the intersection of its shards' (queue.Of). The listener discovers capabilities with
// queue.As, which honours it, so a binding on shards of the local store keeps its body limit,
// moves, batch deletes and push wake-ups. The alternative, one type per combination of
// capabilities, would need 2^11 types. The test TestShardedForwardsEveryCapability walks the
// contract's capability list, so a capability added to the contract without its forwarding
// here fails it.
//
// Ordered receive is forwarded over a single shard only: order groups span the shards, and
// no shard can tell which group is lowest across all of them (the config refuses ordered
// sharded bindings for the same reason).
package sharded

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// Queue spreads receives and sends over its shards. It is safe for concurrent use.
type Queue struct {
	name     string
	shards   []queue.Queue
	byName   map[string]queue.Queue
	refresh  time.Duration
	mu       sync.Mutex
	depths   []int64
	depthsAt time.Time
	next     int
	sendNext int
}

// Options tune a sharded Queue.
type Options struct {
	// DepthRefresh bounds how often shard depths are re-read; zero means 5s.
	DepthRefresh time.Duration
}

// New returns a Queue named name over shards, which must have distinct names.
func New(name string, shards []queue.Queue, opts Options) (*Queue, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("sharded queue %q: no shards", name)
	}
	q := &Queue{name: name, shards: shards, byName: map[string]queue.Queue{},
		refresh: opts.DepthRefresh, depths: make([]int64, len(shards))}
	if q.refresh <= 0 {
		q.refresh = 5 * time.Second
	}
	for _, s := range shards {
		if _, dup := q.byName[s.Name()]; dup {
			return nil, fmt.Errorf("sharded queue %q: duplicate shard %q", name, s.Name())
		}
		q.byName[s.Name()] = s
	}
	return q, nil
}

// Name returns the logical queue name.
func (q *Queue) Name() string { return q.name }

// order returns shard indexes to try: the deepest cached shard first, then the others
// round-robin from a rotating start so no shard starves when depths are stale or equal.
func (q *Queue) order(ctx context.Context) []int {
	q.mu.Lock()
	stale := time.Since(q.depthsAt) >= q.refresh
	q.mu.Unlock()
	if stale {
		_, _ = q.ShardDepths(ctx) // a failed refresh keeps old depths; receive still round-robins
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.shards)
	start := q.next
	q.next = (q.next + 1) % n
	deepest := start
	for i := range n {
		if q.depths[i] > q.depths[deepest] {
			deepest = i
		}
	}
	out := []int{deepest}
	for i := range n {
		if j := (start + i) % n; j != deepest {
			out = append(out, j)
		}
	}
	return out
}

// Receive leases from the deepest shard first and moves on to the others until it has max
// messages or has asked every shard.
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*queue.Message, error) {
	return q.receive(ctx, min(max, queue.MaxBatch), func(s queue.Queue, n int) ([]*queue.Message, error) {
		return s.Receive(ctx, n, visibility)
	})
}

// receive calls recv on the shards, the deepest first, until it has max messages or has
// asked every shard: a receive returns what the logical queue holds, up to max, as a single
// queue's would. Only a short first answer costs calls to the other shards.
func (q *Queue) receive(ctx context.Context, max int, recv func(s queue.Queue, max int) ([]*queue.Message, error)) ([]*queue.Message, error) {
	var errs []error
	var out []*queue.Message
	for _, i := range q.order(ctx) {
		ms, err := recv(q.shards[i], max-len(out))
		if err != nil {
			errs = append(errs, fmt.Errorf("receive from shard %q: %w", q.shards[i].Name(), err))
			continue
		}
		q.mu.Lock()
		if len(ms) > 0 {
			q.depths[i] -= int64(len(ms)) // keep the cache honest between refreshes
		} else {
			q.depths[i] = 0
		}
		q.mu.Unlock()
		if out = append(out, ms...); len(out) >= max {
			break
		}
	}
	if len(out) == 0 && len(errs) > 0 && len(errs) == len(q.shards) {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func (q *Queue) shardOf(m *queue.Message) (queue.Queue, error) {
	s, ok := q.byName[m.Queue]
	if !ok {
		return nil, fmt.Errorf("sharded queue %q: message %s from unknown shard %q: %w", q.name, m.ID, m.Queue, queue.ErrNotFound)
	}
	return s, nil
}

// Delete deletes m on the shard it was received from.
func (q *Queue) Delete(ctx context.Context, m *queue.Message) error {
	s, err := q.shardOf(m)
	if err != nil {
		return err
	}
	return s.Delete(ctx, m)
}

// UpdateVisibility updates m on the shard it was received from.
func (q *Queue) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	s, err := q.shardOf(m)
	if err != nil {
		return err
	}
	return s.UpdateVisibility(ctx, m, d)
}

// Release implements queue.Releaser over the message's shard's own.
func (q *Queue) Release(ctx context.Context, m *queue.Message) error {
	s, err := q.shardOf(m)
	if err != nil {
		return err
	}
	if r, ok := queue.As[queue.Releaser](s); ok {
		return r.Release(ctx, m)
	}
	return errors.ErrUnsupported
}

// Send enqueues on the shards in turn.
func (q *Queue) Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error) {
	q.mu.Lock()
	i := q.sendNext
	q.sendNext = (q.sendNext + 1) % len(q.shards)
	q.mu.Unlock()
	return q.shards[i].Send(ctx, body, opts)
}

// Depth returns the sum of the shard depths, read now.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	ds, err := q.ShardDepths(ctx)
	var sum int64
	for _, d := range ds {
		sum += d
	}
	return sum, err
}

// ShardDepths reads every shard's depth, in shard order, and refreshes the cache.
func (q *Queue) ShardDepths(ctx context.Context) ([]int64, error) {
	ds := make([]int64, len(q.shards))
	var errs []error
	for i, s := range q.shards {
		d, err := s.Depth(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("depth of shard %q: %w", s.Name(), err))
		}
		ds[i] = d
	}
	q.mu.Lock()
	copy(q.depths, ds)
	q.depthsAt = time.Now()
	q.mu.Unlock()
	return ds, errors.Join(errs...)
}
