package memory

import (
	"context"

	"github.com/wqhost/wqhost/listener/queue"
)

var _ queue.Releaser = (*Queue)(nil)

// Release implements queue.Releaser: m visible at once at the head of the queue, its
// dequeue count as before its lease.
func (q *Queue) Release(_ context.Context, m *queue.Message) error {
	return q.setVisible(m, 0, true)
}
