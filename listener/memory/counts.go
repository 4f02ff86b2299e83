package memory

import (
	"context"

	"github.com/wqhost/wqhost/listener/queue"
)

var _ queue.Counter = (*Queue)(nil)

// Counts implements queue.Counter: the depth split into visible, leased and delayed.
func (q *Queue) Counts(context.Context) (queue.Counts, error) {
	nowN := q.b.now().UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	var c queue.Counts
	for _, it := range q.heap {
		switch {
		case it.visible <= nowN:
			c.Visible++
		case it.dequeues > 0:
			c.Leased++
		default:
			c.Delayed++
		}
	}
	return c, nil
}
