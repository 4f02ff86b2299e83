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

// Match selects messages of a queue for Select, Count, DeleteMatching and MoveMatching:
// every set field must hold. It is evaluated in SQL row by row (the attributes with
// json_extract, the body with instr over the stored blob), so no body reaches Go. Without
// Attrs, From, To and Body a match reads the queue's index only.
type Match struct {
	// ID, when above 0, selects only the message with that id.
	ID int64
	// Attrs are conditions on the message's attributes.
	Attrs []AttrMatch
	// From and To bound the time the message was inserted (for a dead letter: when it was
	// dead-lettered): From <= inserted < To; a zero bound is open.
	From, To time.Time
	// Body, when not empty, must occur in the body. Its cost is reading every candidate's
	// whole body inside SQLite (one row at a time, never into Go): the other conditions are
	// checked first.
	Body []byte
	// MaxID, when above 0, leaves out the messages inserted after the snapshot MaxID was read
	// (LastID): a purge or redrive does not take dead letters that arrive while it runs.
	MaxID int64
	// Live leaves out the messages whose time to live ran out (as Peek does).
	Live bool
}

// AttrMatch is a condition on one attribute: equal to Value, or containing it.
type AttrMatch struct {
	Key, Value string
	Contains   bool
}

// where appends the match's SQL conditions (each starting with " AND") and their arguments.
func (m Match) where(sb *strings.Builder, args []any, now int64) []any {
	if m.ID > 0 {
		sb.WriteString(" AND id = ?")
		args = append(args, m.ID)
	}
	if m.MaxID > 0 {
		sb.WriteString(" AND id <= ?")
		args = append(args, m.MaxID)
	}
	if m.Live {
		sb.WriteString(" AND (expires_at = 0 OR expires_at > ?)")
		args = append(args, now)
	}
	if !m.From.IsZero() {
		sb.WriteString(" AND inserted_at >= ?")
		args = append(args, m.From.UnixNano())
	}
	if !m.To.IsZero() {
		sb.WriteString(" AND inserted_at < ?")
		args = append(args, m.To.UnixNano())
	}
	for _, a := range m.Attrs {
		if a.Contains {
			sb.WriteString(" AND instr(json_extract(attrs, ?), ?) > 0")
		} else {
			sb.WriteString(" AND json_extract(attrs, ?) = ?")
		}
		args = append(args, jsonPath(a.Key), a.Value)
	}
	if len(m.Body) > 0 {
		sb.WriteString(" AND instr(body, ?) > 0")
		args = append(args, m.Body)
	}
	return args
}

// jsonPath is the SQLite JSON path of a top-level key, quoted so that dots are part of it.
func jsonPath(key string) string {
	return `$."` + strings.ReplaceAll(key, `"`, `\"`) + `"`
}

// Row is one message as Select and Get read it: Body holds at most the prefix asked for,
// Size is the whole body's size.
type Row struct {
	queue.Message
	Size int64
}

// Page is one keyset page of Select, in (visible_at, id) order: the order of the
// messages_ready index, so a page walks the index from its cursor and never sorts. For a
// dead letter visible_at is when it was dead-lettered (0 once released by a reader that
// leased it).
type Page struct {
	// After is the cursor Select returned for the previous page ("" = from the start).
	After string
	// Limit is the most rows listed; <= 0 lists all.
	Limit int
	// Newest lists from the end of the queue (the latest dead letters first).
	Newest bool
}

const rowColumns = `id, substr(body, 1, ?), length(body), attrs, inserted_at, visible_at, dequeue_count`

// Select calls fn for the messages of the queue that m matches, one page of them, reading
// at most prefix bytes of each body (SQL substr: only the prefix reaches Go). It returns the
// cursor of the last row when more may follow, "" when none do. Leased and delayed messages
// are listed too; rows are read one at a time.
func (q *Queue) Select(ctx context.Context, m Match, p Page, prefix int64, fn func(*Row) error) (next string, err error) {
	var sb strings.Builder
	args := []any{max(prefix, 0), q.name}
	sb.WriteString(`SELECT ` + rowColumns + ` FROM messages WHERE queue = ?`)
	if p.After != "" {
		vis, id, err := parseCursor(p.After)
		if err != nil {
			return "", fmt.Errorf("local: select in %s: %w", q.name, err)
		}
		if p.Newest {
			sb.WriteString(" AND (visible_at, id) < (?, ?)")
		} else {
			sb.WriteString(" AND (visible_at, id) > (?, ?)")
		}
		args = append(args, vis, id)
	}
	args = m.where(&sb, args, q.b.now().UnixNano())
	if p.Newest {
		sb.WriteString(" ORDER BY visible_at DESC, id DESC")
	} else {
		sb.WriteString(" ORDER BY visible_at, id")
	}
	limit := int64(-1)
	if p.Limit > 0 {
		limit = int64(p.Limit) + 1 // one more, to know whether more follow
	}
	sb.WriteString(" LIMIT ?")
	args = append(args, limit)
	rows, err := q.b.db.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return "", q.errf("select in", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		r, vis, err := q.scanRow(rows)
		if err != nil {
			return "", q.errf("select in", err)
		}
		if p.Limit > 0 && n == p.Limit {
			return next, rows.Close()
		}
		if err := fn(r); err != nil {
			return "", err
		}
		n++
		next = strconv.FormatInt(vis, 10) + "." + r.ID
	}
	if err := rows.Err(); err != nil {
		return "", q.errf("select in", err)
	}
	return "", nil
}

func parseCursor(c string) (vis, id int64, err error) {
	v, i, ok := strings.Cut(c, ".")
	vis, e1 := strconv.ParseInt(v, 10, 64)
	id, e2 := strconv.ParseInt(i, 10, 64)
	if !ok || e1 != nil || e2 != nil {
		return 0, 0, fmt.Errorf("cursor %.40q: %w", c, queue.ErrBadCursor)
	}
	return vis, id, nil
}

func (q *Queue) scanRow(rows *sql.Rows) (*Row, int64, error) {
	var (
		id, ins, vis int64
		attrs        sql.NullString
		r            Row
	)
	if err := rows.Scan(&id, &r.Body, &r.Size, &attrs, &ins, &vis, &r.DequeueCount); err != nil {
		return nil, 0, err
	}
	if attrs.Valid {
		if err := json.Unmarshal([]byte(attrs.String), &r.Attributes); err != nil {
			return nil, 0, fmt.Errorf("attributes of message %d: %w", id, err)
		}
	}
	if r.Body == nil {
		r.Body = []byte{}
	}
	r.ID, r.Queue, r.InsertedAt = strconv.FormatInt(id, 10), q.name, time.Unix(0, ins)
	if vis > 0 {
		r.VisibleAt = time.Unix(0, vis)
	}
	return &r, vis, nil
}

// Get reads one message of the queue by id with at most prefix bytes of its body; nil when
// the queue has no such message.
func (q *Queue) Get(ctx context.Context, id string, prefix int64) (*Row, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return nil, nil // not an id of this store
	}
	rows, err := q.b.db.QueryContext(ctx, `SELECT `+rowColumns+` FROM messages WHERE queue = ? AND id = ?`, max(prefix, 0), q.name, n)
	if err != nil {
		return nil, q.errf("get from", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, q.errf("get from", err)
		}
		return nil, nil
	}
	r, _, err := q.scanRow(rows)
	if err != nil {
		return nil, q.errf("get from", err)
	}
	return r, nil
}

// Count counts the messages of the queue that m matches.
func (q *Queue) Count(ctx context.Context, m Match) (int64, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT count(*) FROM messages WHERE queue = ?`)
	args := m.where(&sb, []any{q.name}, q.b.now().UnixNano())
	var n int64
	if err := q.b.db.QueryRowContext(ctx, sb.String(), args...).Scan(&n); err != nil {
		return 0, q.errf("count in", err)
	}
	return n, nil
}

// LastID is the highest message id in the store: Match.MaxID for a snapshot.
func (b *Backend) LastID(ctx context.Context) (int64, error) {
	var n int64
	if err := b.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&n); err != nil {
		return 0, fmt.Errorf("local: last id in %s: %w", b.path, err)
	}
	return n, nil
}

// MatchChunk is how many messages DeleteMatching and MoveMatching take per transaction:
// each chunk is one short write of the store's writer, so a host using the store keeps
// being served between chunks.
const MatchChunk = 256

// Cursor walks a queue's matching messages chunk by chunk for DeleteMatching and
// MoveMatching; its zero value starts at the head.
type Cursor struct{ vis, id int64 }

// candidates reads the ids of up to n matching messages after c (on a reading connection,
// not the writer) and moves c past them.
func (q *Queue) candidates(ctx context.Context, m Match, c *Cursor, n int) ([]int64, error) {
	var sb strings.Builder
	sb.WriteString(`SELECT id, visible_at FROM messages WHERE queue = ? AND (visible_at, id) > (?, ?)`)
	args := m.where(&sb, []any{q.name, c.vis, c.id}, q.b.now().UnixNano())
	sb.WriteString(" ORDER BY visible_at, id LIMIT ?")
	args = append(args, n)
	rows, err := q.b.db.QueryContext(ctx, sb.String(), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		if err := rows.Scan(&c.id, &c.vis); err != nil {
			return nil, err
		}
		ids = append(ids, c.id)
	}
	return ids, rows.Err()
}

// DeleteMatching deletes the next chunk (at most n, at most MatchChunk) of messages m
// matches after c, in one transaction, and returns how many it found and deleted; found 0
// means the walk is over. A message leased at that moment (a reader holds it) is left.
func (q *Queue) DeleteMatching(ctx context.Context, m Match, c *Cursor, n int) (found, deleted int, err error) {
	ids, err := q.candidates(ctx, m, c, min(max(n, 1), MatchChunk))
	if err != nil {
		return 0, 0, q.errf("delete matching in", err)
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	in := placeholders(len(ids), "?")
	o := &op{apply: func(now int64) error {
		args := append([]any{q.name, now}, int64Args(ids)...)
		res, err := q.b.wconn.ExecContext(context.Background(), `DELETE FROM messages WHERE queue = ? AND visible_at <= ? AND id IN (`+in+`)`, args...)
		if err != nil {
			return fmt.Errorf("delete %d messages (ids %d..) in %s: %w", len(ids), ids[0], q.name, err)
		}
		k, err := res.RowsAffected()
		deleted = int(k)
		return err
	}}
	if err := q.b.do(ctx, o); err != nil {
		return len(ids), 0, q.errf("delete matching in", err)
	}
	return len(ids), deleted, nil
}

// MoveMatching moves the next chunk (at most n, at most MatchChunk) of messages m matches
// after c to dst, a queue of the same store, in one transaction: each is inserted into dst
// with its body (copied inside the store, never loaded) and its attributes less the keys
// drop, as a new message (fresh dequeue count), and deleted here. A message leased at that
// moment is left. It returns how many it found and moved; found 0 means the walk is over.
func (q *Queue) MoveMatching(ctx context.Context, m Match, c *Cursor, n int, dst *Queue, drop []string) (found, moved int, err error) {
	if dst.b != q.b {
		return 0, 0, q.errf("move matching from", fmt.Errorf("%s is not a queue of this store", dst.name))
	}
	ids, err := q.candidates(ctx, m, c, min(max(n, 1), MatchChunk))
	if err != nil {
		return 0, 0, q.errf("move matching from", err)
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	in := placeholders(len(ids), "?")
	attrs := "attrs"
	var dropArgs []any
	if len(drop) > 0 {
		attrs = "nullif(json_remove(attrs, " + placeholders(len(drop), "?") + "), '{}')"
		for _, k := range drop {
			dropArgs = append(dropArgs, jsonPath(k))
		}
	}
	o := &op{wakes: dst, apply: func(now int64) error {
		args := append(append([]any{dst.name}, dropArgs...), now, now, q.name, now)
		args = append(args, int64Args(ids)...)
		res, err := q.b.wconn.ExecContext(context.Background(), `INSERT INTO messages (queue, body, attrs, inserted_at, visible_at, expires_at, lease)
			SELECT ?, body, `+attrs+`, ?, ?, 0, `+unleased+` FROM messages WHERE queue = ? AND visible_at <= ? AND id IN (`+in+`) ORDER BY id`, args...)
		if err != nil {
			return fmt.Errorf("copy %d messages (ids %d..) from %s to %s: %w", len(ids), ids[0], q.name, dst.name, err)
		}
		ins, _ := res.RowsAffected()
		res, err = q.b.wconn.ExecContext(context.Background(), `DELETE FROM messages WHERE queue = ? AND visible_at <= ? AND id IN (`+in+`)`,
			append([]any{q.name, now}, int64Args(ids)...)...)
		if err != nil {
			return fmt.Errorf("delete %d moved messages (ids %d..) in %s: %w", len(ids), ids[0], q.name, err)
		}
		if del, _ := res.RowsAffected(); del != ins {
			return fmt.Errorf("moved %d messages from %s but deleted %d", ins, q.name, del) // one writer: cannot happen
		}
		moved = int(ins)
		return nil
	}}
	if err := q.b.do(ctx, o); err != nil {
		return len(ids), 0, q.errf("move matching from", err)
	}
	return len(ids), moved, nil
}

func int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// Backend is the store the queue belongs to.
func (q *Queue) Backend() *Backend { return q.b }
