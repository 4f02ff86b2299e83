package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/wqhost/wqhost/internal/wake"
	"github.com/wqhost/wqhost/listener/queue"
)

// Queue is one named queue in the store.
type Queue struct {
	name string
	b    *Backend

	wake wake.Set // the waiters until the next write
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

func (q *Queue) broadcast() { q.wake.Fire() }

func (q *Queue) errf(what string, err error) error {
	return fmt.Errorf("local: %s %s: %w", what, q.name, err)
}

// Receive leases up to max visible messages in (visible_at, id) order. A body above the
// store's MaxBodyBytes is not loaded (see ReceiveLimited).
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*queue.Message, error) {
	return q.ReceiveLimited(ctx, max, visibility, q.b.maxBody)
}

// ReceiveLimited implements queue.BodyLimiter: it is Receive, loading only bodies of at
// most maxBody bytes (and at most the store's MaxBodyBytes); a larger one is leased with Body
// nil and Oversize set to its size, read neither from disk nor into memory. MoveTo moves such
// a message with its stored body.
func (q *Queue) ReceiveLimited(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*queue.Message, error) {
	maxBody = min(maxBody, q.b.maxBody)
	if max < 1 {
		return nil, fmt.Errorf("local: receive from %s: max %d < 1", q.name, max)
	}
	max = min(max, queue.MaxBatch)
	out := make([]*queue.Message, 0, max)
	s := &q.b.stmts
	o := &op{apply: func(now int64) error {
		out = out[:0]
		rows, err := s.selectReady.Query(maxBody, q.name, now, max)
		if err != nil {
			return fmt.Errorf("select ready in %s: %w", q.name, err)
		}
		var expired []int64
		ids := make([]int64, 0, max)
		if out, ids, expired, err = q.scanReady(rows, now, out, ids); err != nil {
			return fmt.Errorf("select ready in %s: %w", q.name, err)
		}
		if len(ids) > 0 {
			// One token for the batch: a token only has to differ between the leases of one
			// message, and each receive takes a fresh one.
			until, tok := now+int64(visibility), q.b.nextLease()
			st, err := q.b.batchStmt(q.b.leaseN, len(ids), leaseSQL)
			if err != nil {
				return fmt.Errorf("lease messages in %s: %w", q.name, err)
			}
			args := make([]any, 0, 2+len(ids))
			args = append(args, until, tok)
			for _, id := range ids {
				args = append(args, id)
			}
			if _, err := st.Exec(args...); err != nil {
				return fmt.Errorf("lease %d messages (ids %d..) in %s: %w", len(ids), ids[0], q.name, err)
			}
			token, vis := strconv.FormatInt(tok, 36), time.Unix(0, until)
			for _, m := range out {
				m.LeaseToken, m.VisibleAt = token, vis
			}
		}
		for _, id := range expired {
			if _, err := s.del.Exec(id); err != nil {
				return fmt.Errorf("drop expired message %d in %s: %w", id, q.name, err)
			}
		}
		return nil
	}}
	if err := q.b.do(ctx, o); err != nil {
		return nil, q.errf("receive from", err)
	}
	return out, nil
}

// idOf and tokenOf are m's id and lease token, or -1 (no row) when they do not parse.
func idOf(m *queue.Message) int64 {
	id, _, ok := parseLease(m)
	if !ok {
		return -1
	}
	return id
}

func tokenOf(m *queue.Message) int64 {
	_, tok, ok := parseLease(m)
	if !ok {
		return -1
	}
	return tok
}

// checkSize refuses a body above the store's MaxBodyBytes.
func (q *Queue) checkSize(what string, n int) error {
	if int64(n) > q.b.maxBody {
		return q.errf(what, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, q.b.maxBody))
	}
	return nil
}

func parseLease(m *queue.Message) (id, tok int64, ok bool) {
	id, err1 := strconv.ParseInt(m.ID, 10, 64)
	tok, err2 := strconv.ParseInt(m.LeaseToken, 36, 64)
	return id, tok, err1 == nil && err2 == nil
}

// Send enqueues a message and returns its id once committed. A body above the store's
// MaxBodyBytes is refused with ErrTooLarge.
func (q *Queue) Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error) {
	if err := q.checkSize("send to", len(body)); err != nil {
		return "", err
	}
	var attrs any
	if len(opts.Attributes) > 0 {
		j, err := json.Marshal(opts.Attributes)
		if err != nil {
			return "", q.errf("encode attributes for", err)
		}
		attrs = string(j)
	}
	if body == nil {
		body = []byte{}
	}
	var id int64
	o := &op{wakes: q, apply: func(now int64) error {
		var exp int64
		if opts.TTL > 0 {
			exp = now + int64(opts.TTL)
		}
		res, err := q.b.stmts.insert.Exec(q.name, body, attrs, now, now+int64(max(opts.Delay, 0)), exp)
		if err != nil {
			return fmt.Errorf("insert into %s: %w", q.name, err)
		}
		id, err = res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert into %s: %w", q.name, err)
		}
		return nil
	}}
	if err := q.b.do(ctx, o); err != nil {
		return "", q.errf("send to", err)
	}
	return strconv.FormatInt(id, 10), nil
}

// SendBatch enqueues many messages in one transaction (bulk loads, the CLI's send) and
// returns their ids in order.
func (q *Queue) SendBatch(ctx context.Context, bodies [][]byte, opts queue.SendOptions) ([]string, error) {
	for i, body := range bodies {
		if err := q.checkSize(fmt.Sprintf("send (message %d of batch) to", i), len(body)); err != nil {
			return nil, err
		}
	}
	var attrs any
	if len(opts.Attributes) > 0 {
		j, err := json.Marshal(opts.Attributes)
		if err != nil {
			return nil, q.errf("encode attributes for", err)
		}
		attrs = string(j)
	}
	ids := make([]string, 0, len(bodies))
	o := &op{wakes: q, apply: func(now int64) error {
		ids = ids[:0]
		var exp int64
		if opts.TTL > 0 {
			exp = now + int64(opts.TTL)
		}
		for i, body := range bodies {
			if body == nil {
				body = []byte{}
			}
			res, err := q.b.stmts.insert.Exec(q.name, body, attrs, now, now+int64(max(opts.Delay, 0)), exp)
			if err != nil {
				return fmt.Errorf("insert message %d of batch into %s: %w", i, q.name, err)
			}
			id, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("insert message %d of batch into %s: %w", i, q.name, err)
			}
			ids = append(ids, strconv.FormatInt(id, 10))
		}
		return nil
	}}
	if err := q.b.do(ctx, o); err != nil {
		return nil, q.errf("send batch to", err)
	}
	return ids, nil
}

// Depth counts the queue's messages, leased and delayed ones included.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	var n int64
	if err := q.b.db.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE queue = ?`, q.name).Scan(&n); err != nil {
		return 0, q.errf("depth of", err)
	}
	return n, nil
}

func (q *Queue) scanReady(rows *sql.Rows, now int64, out []*queue.Message, ids []int64) (_ []*queue.Message, _, expired []int64, err error) {
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	for rows.Next() {
		var (
			id, ins, exp, size int64
			dq                 int
			attrs              sql.NullString
			m                  queue.Message
		)
		if err := rows.Scan(&id, &m.Body, &size, &attrs, &ins, &dq, &exp); err != nil {
			return out, ids, expired, fmt.Errorf("scan message: %w", err)
		}
		if exp != 0 && exp <= now {
			expired = append(expired, id)
			continue
		}
		if m.Body == nil {
			if size > 0 {
				m.Oversize = size // left in the store: above the receive's body limit
			} else {
				m.Body = []byte{}
			}
		}
		if attrs.Valid {
			if err := json.Unmarshal([]byte(attrs.String), &m.Attributes); err != nil {
				return out, ids, expired, fmt.Errorf("attributes of message %d: %w", id, err)
			}
		}
		m.ID = strconv.FormatInt(id, 10)
		m.Queue = q.name
		m.DequeueCount = dq + 1
		m.InsertedAt = time.Unix(0, ins)
		ids = append(ids, id)
		out = append(out, &m)
	}
	return out, ids, expired, rows.Err()
}
