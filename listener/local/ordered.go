package local

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// orderExpr is a message's order group: the integer value of its AttrOrderKey attribute
// (NULL without one; a key that is not an integer counts as 0).
const orderExpr = `CAST(json_extract(attrs, '$."` + queue.AttrOrderKey + `"') AS INTEGER)`

// orderIndexSQL lets the lowest group of a queue be found without reading every row.
const orderIndexSQL = `CREATE INDEX IF NOT EXISTS messages_order ON messages (queue, ` + orderExpr + `)`

const (
	minGroupSQL    = `SELECT min(` + orderExpr + `) FROM messages WHERE queue = ?`
	selectGroupSQL = `SELECT id, ` + bodyColumns + `, attrs, inserted_at, dequeue_count, expires_at FROM messages
	WHERE queue = ?2 AND visible_at <= ?3 AND (` + orderExpr + ` IS NULL OR ` + orderExpr + ` = ?4)
	ORDER BY visible_at, id LIMIT ?5`
	heldSQL = `SELECT EXISTS (SELECT 1 FROM messages WHERE queue = ? AND visible_at <= ? AND ` + orderExpr + ` > ?)`
	// nextInGroupSQL is when the group's next message becomes visible.
	nextInGroupSQL = `SELECT min(visible_at) FROM messages WHERE queue = ? AND visible_at > ? AND ` + orderExpr + ` = ?`
)

var _ queue.OrderedReceiver = (*Queue)(nil)

// ReceiveOrdered implements queue.OrderedReceiver: it leases up to max visible messages
// of the lowest order group in the queue (counting leased and delayed messages, so a
// group whose retry is pending still holds the next one back) and messages without an
// order key, in (visible_at, id) order. Bodies above maxBody are left unread, as
// ReceiveLimited leaves them. The group is found and the messages leased in one
// transaction of the store's writer, so no Send or settle can slip in between.
func (q *Queue) ReceiveOrdered(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*queue.Message, time.Time, error) {
	if maxBody <= 0 {
		maxBody = q.b.maxBody
	}
	maxBody = min(maxBody, q.b.maxBody)
	if max < 1 {
		return nil, time.Time{}, fmt.Errorf("local: ordered receive from %s: max %d < 1", q.name, max)
	}
	max = min(max, queue.MaxBatch)
	var (
		out       []*queue.Message
		heldUntil time.Time
	)
	o := &op{apply: func(now int64) error {
		out, heldUntil = out[:0], time.Time{}
		c := q.b.wconn
		bg := context.Background()
		if !q.b.orderIndexed {
			// Only stores that use ordered mode pay for the index, and only once per open.
			if _, err := c.ExecContext(bg, orderIndexSQL); err != nil {
				return fmt.Errorf("order index: %w", err)
			}
			q.b.orderIndexed = true
		}
		var group sql.NullInt64
		if err := c.QueryRowContext(bg, minGroupSQL, q.name).Scan(&group); err != nil {
			return fmt.Errorf("lowest order group in %s: %w", q.name, err)
		}
		rows, err := c.QueryContext(bg, selectGroupSQL, maxBody, q.name, now, group, max)
		if err != nil {
			return fmt.Errorf("select group %v in %s: %w", group, q.name, err)
		}
		var expired, ids []int64
		if out, ids, expired, err = q.scanReady(rows, now, out, ids); err != nil {
			return fmt.Errorf("select group %v in %s: %w", group, q.name, err)
		}
		for _, id := range expired {
			if _, err := c.ExecContext(bg, `DELETE FROM messages WHERE id = ?`, id); err != nil {
				return fmt.Errorf("drop expired message %d in %s: %w", id, q.name, err)
			}
		}
		if len(ids) == 0 {
			if !group.Valid {
				return nil
			}
			var held bool
			if err := c.QueryRowContext(bg, heldSQL, q.name, now, group.Int64).Scan(&held); err != nil {
				return fmt.Errorf("held messages in %s: %w", q.name, err)
			}
			if !held {
				return nil
			}
			var next sql.NullInt64
			if err := c.QueryRowContext(bg, nextInGroupSQL, q.name, now, group.Int64).Scan(&next); err != nil {
				return fmt.Errorf("next message of group %d in %s: %w", group.Int64, q.name, err)
			}
			heldUntil = time.Unix(0, now) // the group's visible messages just expired: look again
			if next.Valid {
				heldUntil = time.Unix(0, next.Int64)
			}
			return nil
		}
		until, tok := now+int64(visibility), q.b.nextLease()
		args := make([]any, 0, 2+len(ids))
		args = append(args, until, tok)
		for _, id := range ids {
			args = append(args, id)
		}
		if _, err := c.ExecContext(bg, leaseSQL(len(ids)), args...); err != nil {
			return fmt.Errorf("lease %d messages (ids %d..) in %s: %w", len(ids), ids[0], q.name, err)
		}
		token, vis := strconv.FormatInt(tok, 36), time.Unix(0, until)
		for _, m := range out {
			m.LeaseToken, m.VisibleAt = token, vis
		}
		return nil
	}}
	if err := q.b.do(ctx, o); err != nil {
		return nil, time.Time{}, q.errf("ordered receive from", err)
	}
	return out, heldUntil, nil
}
