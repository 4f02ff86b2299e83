package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// Peek returns up to max messages of the queue in receive order without leasing or changing
// them: leased and delayed messages too (VisibleAt tells when they become receivable), expired
// ones not. DequeueCount is the number of receives so far. It is for inspection tools (wqhost
// peek); max <= 0 means no limit.
func (q *Queue) Peek(ctx context.Context, max int) ([]*queue.Message, error) {
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
	var out []*queue.Message
	for rows.Next() {
		var (
			id, ins, vis int64
			attrs        sql.NullString
			m            queue.Message
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

// listSQL walks messages_ready in order from a cursor (see TestListUsesReadyIndex).
const listSQL = `SELECT id, ` + bodyColumns + `, attrs, inserted_at, visible_at, dequeue_count FROM messages
	WHERE queue = ?2 AND (visible_at, id) > (?3, ?4) ORDER BY visible_at, id LIMIT ?5`

// List calls fn, in receive order ((visible_at, id): the order of messages_ready, so the
// listing walks the index and never sorts), for up to max messages of the queue that follow
// the cursor after ("" = from the start), leased and delayed ones included, without leasing
// or changing them. A body above maxBody bytes is not read (Body nil, Oversize its size),
// and rows are read one at a time, so a listing holds one capped message at once whatever
// the queue holds. It returns the cursor of the last message listed when more follow, ""
// when none do. max <= 0 means no limit.
func (q *Queue) List(ctx context.Context, after string, max int, maxBody int64, fn func(*queue.Message) error) (next string, err error) {
	var vis0, id0 int64 = -1 << 63, -1 << 63
	if after != "" {
		v, i, ok := strings.Cut(after, ".")
		var e1, e2 error
		vis0, e1 = strconv.ParseInt(v, 10, 64)
		id0, e2 = strconv.ParseInt(i, 10, 64)
		if !ok || e1 != nil || e2 != nil {
			return "", fmt.Errorf("local: list %s: cursor %.40q: %w", q.name, after, queue.ErrBadCursor)
		}
	}
	limit := int64(-1) // SQLite: no limit
	if max > 0 {
		limit = int64(max) + 1 // one more, to know whether more follow
	}
	rows, err := q.b.db.QueryContext(ctx, listSQL, min(maxBody, q.b.maxBody), q.name, vis0, id0, limit)
	if err != nil {
		return "", q.errf("list", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			id, size, ins, vis int64
			attrs              sql.NullString
			m                  queue.Message
		)
		if err := rows.Scan(&id, &m.Body, &size, &attrs, &ins, &vis, &m.DequeueCount); err != nil {
			return "", q.errf("list", err)
		}
		if max > 0 && n == max {
			return next, rows.Close()
		}
		if attrs.Valid {
			if err := json.Unmarshal([]byte(attrs.String), &m.Attributes); err != nil {
				return "", q.errf("list", fmt.Errorf("attributes of message %d: %w", id, err))
			}
		}
		if m.Body == nil {
			if size > 0 {
				m.Oversize = size
			} else {
				m.Body = []byte{}
			}
		}
		m.ID, m.Queue, m.InsertedAt = strconv.FormatInt(id, 10), q.name, time.Unix(0, ins)
		if vis > 0 {
			m.VisibleAt = time.Unix(0, vis)
		}
		if err := fn(&m); err != nil {
			return "", err
		}
		n++
		next = strconv.FormatInt(vis, 10) + "." + strconv.FormatInt(id, 10)
	}
	if err := rows.Err(); err != nil {
		return "", q.errf("list", err)
	}
	return "", nil
}
