package local

import (
	"context"

	"github.com/wqhost/wqhost/listener/queue"
)

var _ queue.Counter = (*Queue)(nil)

const countsSQL = `SELECT
	coalesce(sum(visible_at <= ?2), 0),
	coalesce(sum(visible_at > ?2 AND dequeue_count > 0), 0),
	coalesce(sum(visible_at > ?2 AND dequeue_count = 0), 0)
FROM messages WHERE queue = ?1`

// Counts implements queue.Counter: the depth split into visible, leased and delayed, read in
// one query (expired messages not yet dropped count as visible, as Depth counts them).
func (q *Queue) Counts(ctx context.Context) (queue.Counts, error) {
	var c queue.Counts
	now := q.b.now().UnixNano()
	if err := q.b.db.QueryRowContext(ctx, countsSQL, q.name, now).Scan(&c.Visible, &c.Leased, &c.Delayed); err != nil {
		return queue.Counts{}, q.errf("counts of", err)
	}
	return c, nil
}
