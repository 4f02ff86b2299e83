package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/wqhost/wqhost/listener"
)

// Peek returns up to max messages of the queue in receive order without leasing or changing
// them: leased and delayed messages too (VisibleAt tells when they become receivable), expired
// ones not. DequeueCount is the number of receives so far. It is for inspection tools (wqhost
// peek); max <= 0 means no limit.
func (q *Queue) Peek(ctx context.Context, max int) ([]*listener.Message, error) {
	limit := int64(max)
	if max <= 0 {
		limit = -1 // SQLite: no limit
	}
	now := q.b.now().UnixNano()
	rows, err := q.b.db.QueryContext(ctx, `SELECT id, body, attrs, inserted_at, visible_at, dequeue_count FROM messages
		WHERE queue = ? AND (expires_at = 0 OR expires_at > ?) ORDER BY visible_at, id LIMIT ?`, q.name, now, limit)
	if err != nil {
		return nil, q.errf("peek", err)
	}
	defer rows.Close()
	var out []*listener.Message
	for rows.Next() {
		var (
			id, ins, vis int64
			attrs        sql.NullString
			m            listener.Message
		)
		if err := rows.Scan(&id, &m.Body, &attrs, &ins, &vis, &m.DequeueCount); err != nil {
			return nil, q.errf("peek", err)
		}
		if attrs.Valid {
			if err := json.Unmarshal([]byte(attrs.String), &m.Attributes); err != nil {
				return nil, q.errf("peek", fmt.Errorf("attributes of message %d: %w", id, err))
			}
		}
		if m.Body == nil {
			m.Body = []byte{}
		}
		m.ID, m.Queue, m.InsertedAt = strconv.FormatInt(id, 10), q.name, time.Unix(0, ins)
		if vis > 0 {
			m.VisibleAt = time.Unix(0, vis)
		}
		out = append(out, &m)
	}
	if err := rows.Err(); err != nil {
		return nil, q.errf("peek", err)
	}
	return out, nil
}
