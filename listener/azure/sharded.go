package azure

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/sharded"
)

// Sharded is a logical queue spread over several Azure queues (orders-0..orders-7): the
// whitepaper's answer past one queue's throughput target. Workers receive from the deepest
// shard first (listener/sharded); depth and request counters are kept per shard.
type Sharded struct {
	*sharded.Queue
	shards []*Queue
}

// OpenSharded opens the shard queues and composes them into one Queue named name.
func (b *Backend) OpenSharded(ctx context.Context, name string, shardNames []string, opts sharded.Options) (*Sharded, error) {
	if len(shardNames) == 0 {
		return nil, fmt.Errorf("azure: sharded queue %q: no shards", name)
	}
	s := &Sharded{}
	qs := make([]listener.Queue, 0, len(shardNames))
	for _, n := range shardNames {
		q, err := b.Queue(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("azure: sharded queue %q: %w", name, err)
		}
		s.shards = append(s.shards, q)
		qs = append(qs, q)
	}
	sq, err := sharded.New(name, qs, opts)
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	s.Queue = sq
	return s, nil
}

// Shards returns the shard queues in order.
func (s *Sharded) Shards() []*Queue { return append([]*Queue(nil), s.shards...) }

// ShardStats returns each shard's request counters, by shard name.
func (s *Sharded) ShardStats() map[string]Stats {
	out := make(map[string]Stats, len(s.shards))
	for _, q := range s.shards {
		out[q.Name()] = q.Stats()
	}
	return out
}

// Stats returns the counters summed over the shards.
func (s *Sharded) Stats() Stats {
	var sum Stats
	for _, q := range s.shards {
		sum = sum.Add(q.Stats())
	}
	return sum
}

var shardRangeRE = regexp.MustCompile(`^([a-z0-9-]*?)(\d+)\.\.([a-z0-9-]*?)(\d+)$`)

// ExpandShards expands a shard range such as "orders-0..orders-7" into its queue names; any
// other string is a single queue name.
func ExpandShards(spec string) ([]string, error) {
	m := shardRangeRE.FindStringSubmatch(spec)
	if m == nil {
		if err := ValidQueueName(spec); err != nil {
			return nil, fmt.Errorf("azure: shard list %q: %w", spec, err)
		}
		return []string{spec}, nil
	}
	if m[1] != m[3] {
		return nil, fmt.Errorf("azure: shard range %q: prefixes %q and %q differ", spec, m[1], m[3])
	}
	lo, err1 := strconv.Atoi(m[2])
	hi, err2 := strconv.Atoi(m[4])
	if err1 != nil || err2 != nil || lo > hi || hi-lo >= 1024 {
		return nil, fmt.Errorf("azure: shard range %q: want ascending numbers at most 1024 apart", spec)
	}
	names := make([]string, 0, hi-lo+1)
	for i := lo; i <= hi; i++ {
		n := m[1] + strconv.Itoa(i)
		if err := ValidQueueName(n); err != nil {
			return nil, fmt.Errorf("azure: shard range %q: %w", spec, err)
		}
		names = append(names, n)
	}
	return names, nil
}
