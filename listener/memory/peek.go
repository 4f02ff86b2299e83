package memory

import (
	"context"
	"sort"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// Peek returns up to max messages of the queue in receive order without leasing or changing
// them: leased and delayed ones too (VisibleAt tells when they become receivable), expired
// ones not. DequeueCount is the number of receives so far; Body and Attributes are copies.
// max <= 0 means no limit.
func (q *Queue) Peek(ctx context.Context, max int) ([]*queue.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := q.b.now().UnixNano()
	q.mu.Lock()
	items := make([]*item, 0, len(q.heap))
	for _, it := range q.heap {
		if it.expires == 0 || it.expires > now {
			items = append(items, it)
		}
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].visible != items[j].visible {
			return items[i].visible < items[j].visible
		}
		return items[i].seq < items[j].seq
	})
	if max > 0 && len(items) > max {
		items = items[:max]
	}
	out := make([]*queue.Message, len(items))
	for i, it := range items {
		m := &queue.Message{ID: it.id, Queue: q.name, Body: append([]byte{}, it.body...),
			DequeueCount: it.dequeues, InsertedAt: it.inserted}
		if it.visible > 0 {
			m.VisibleAt = time.Unix(0, it.visible)
		}
		if it.attrs != nil {
			m.Attributes = make(map[string]string, len(it.attrs))
			for k, v := range it.attrs {
				m.Attributes[k] = v
			}
		}
		out[i] = m
	}
	q.mu.Unlock()
	return out, nil
}
