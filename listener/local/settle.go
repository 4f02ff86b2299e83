package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

func (q *Queue) deleteOne(m *queue.Message, now int64) (lost bool, err error) {
	id, tok, ok := parseLease(m)
	if !ok {
		return true, nil
	}
	res, err := q.b.stmts.delLeased.Exec(id, q.name, tok, now)
	if err != nil {
		return false, fmt.Errorf("delete message %s in %s: %w", m.ID, q.name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete message %s in %s: %w", m.ID, q.name, err)
	}
	return n == 0, nil
}

// deleteChunk deletes up to MaxBatch leased messages with one statement and sets errs[i] to
// ErrLeaseLost for each message whose lease was no longer held. It returns storage errors.
func (q *Queue) deleteChunk(ms []*queue.Message, errs []error, now int64) error {
	var idBuf [queue.MaxBatch]int64
	msgID := idBuf[:len(ms)] // each message's id, 0 when it holds no lease to delete with
	ids := make([]int64, 0, len(ms))
	pairs := make([]any, 0, 2*len(ms))
	for i, m := range ms {
		id, tok, ok := parseLease(m)
		if !ok || slices.Contains(ids, id) {
			// A second delete of one message in a batch finds it gone, as it would alone.
			continue
		}
		msgID[i] = id
		ids = append(ids, id)
		pairs = append(pairs, id, tok)
	}
	deleted := make([]int64, 0, len(ids))
	if len(ids) > 0 {
		oneToken := true
		for i := 3; i < len(pairs); i += 2 {
			oneToken = oneToken && pairs[i] == pairs[1]
		}
		cache, build := q.b.deleteN, deleteLeasedSQL
		if oneToken {
			cache, build = q.b.deleteTokN, deleteLeasedOneTokenSQL
		}
		st, err := q.b.batchStmt(cache, len(ids), build)
		if err != nil {
			return fmt.Errorf("delete messages in %s: %w", q.name, err)
		}
		args := make([]any, 0, 3*len(ids)+2)
		for _, id := range ids {
			args = append(args, id)
		}
		args = append(args, q.name, now)
		if oneToken {
			args = append(args, pairs[1])
		} else {
			args = append(args, pairs...)
		}
		rows, err := st.Query(args...)
		if err != nil {
			return fmt.Errorf("delete %d messages (ids %d..) in %s: %w", len(ids), ids[0], q.name, err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("delete messages in %s: %w", q.name, err)
			}
			deleted = append(deleted, id)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("delete %d messages (ids %d..) in %s: %w", len(ids), ids[0], q.name, err)
		}
	}
	for i, m := range ms {
		errs[i] = nil
		if msgID[i] == 0 || !slices.Contains(deleted, msgID[i]) {
			errs[i] = q.lost(m)
		}
	}
	return nil
}

func (q *Queue) lost(m *queue.Message) error {
	return fmt.Errorf("local: message %s in %s: %w", m.ID, q.name, queue.ErrLeaseLost)
}

// Delete removes a leased message; ErrLeaseLost if its lease expired or was replaced.
func (q *Queue) Delete(ctx context.Context, m *queue.Message) error {
	var lost bool
	o := &op{apply: func(now int64) (err error) {
		lost, err = q.deleteOne(m, now)
		return err
	}}
	if err := q.b.do(ctx, o); err != nil {
		return q.errf("delete from", err)
	}
	if lost {
		return q.lost(m)
	}
	return nil
}

// DeleteBatch deletes the messages in one transaction and returns one error per message.
func (q *Queue) DeleteBatch(ctx context.Context, ms []*queue.Message) []error {
	errs := make([]error, len(ms))
	o := &op{apply: func(now int64) error {
		for start := 0; start < len(ms); start += queue.MaxBatch {
			if err := q.deleteChunk(ms[start:min(start+queue.MaxBatch, len(ms))], errs[start:], now); err != nil {
				return err
			}
		}
		return nil
	}}
	if err := q.b.do(ctx, o); err != nil {
		err = q.errf("delete batch from", err)
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// UpdateVisibility makes a leased message visible after d with a new lease token; d <= 0
// releases it to the head of the queue.
func (q *Queue) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	return q.setVisible(ctx, m, d, q.b.stmts.updVis)
}

// Release implements queue.Releaser: m visible at once, its dequeue count as before its
// lease.
func (q *Queue) Release(ctx context.Context, m *queue.Message) error {
	return q.setVisible(ctx, m, 0, q.b.stmts.release)
}

// setVisible is UpdateVisibility with stmt, updVis or release.
func (q *Queue) setVisible(ctx context.Context, m *queue.Message, d time.Duration, stmt *sql.Stmt) error {
	var lost bool
	var tok, until int64
	o := &op{apply: func(now int64) error {
		id, old, ok := parseLease(m)
		if !ok {
			lost = true
			return nil
		}
		tok = q.b.nextLease()
		until = now + int64(max(d, 0))
		vis := until
		if d <= 0 {
			vis = 0 // the head: before every message that became visible normally
		}
		res, err := stmt.Exec(vis, tok, id, q.name, old, now)
		if err != nil {
			return fmt.Errorf("update visibility of message %s in %s: %w", m.ID, q.name, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("update visibility of message %s in %s: %w", m.ID, q.name, err)
		}
		lost = n == 0
		return nil
	}}
	if d <= 0 || q.b.realClk {
		o.wakes = q
	}
	if err := q.b.do(ctx, o); err != nil {
		return q.errf("update visibility in", err)
	}
	if lost {
		return q.lost(m)
	}
	m.LeaseToken = strconv.FormatInt(tok, 36)
	m.VisibleAt = time.Unix(0, until)
	return nil
}

// MoveTo implements queue.Mover: it inserts body into dl and deletes the leased m in one
// transaction, so a message is dead-lettered exactly once per lease (never twice by a
// redelivered copy, never lost). It fails with ErrLeaseLost, inserting nothing, when m's
// lease is no longer held, and with errors.ErrUnsupported when dl is not a queue of this
// store.
func (q *Queue) MoveTo(ctx context.Context, m *queue.Message, dl queue.Queue, body []byte, opts queue.SendOptions) error {
	dq, ok := dl.(*Queue)
	if !ok || dq.b != q.b {
		return errors.ErrUnsupported
	}
	var attrs any
	if len(opts.Attributes) > 0 {
		j, err := json.Marshal(opts.Attributes)
		if err != nil {
			return q.errf("encode attributes for", err)
		}
		attrs = string(j)
	}
	if err := q.checkSize("move to "+dq.name+" from", len(body)); err != nil {
		return err
	}
	// A message received unloaded (Oversize) moves with the body it has in the store.
	stored := body == nil && m.Oversize > 0
	if body == nil {
		body = []byte{}
	}
	var lost bool
	o := &op{wakes: dq, apply: func(now int64) (err error) {
		if stored {
			// Copy first, then delete: the copy needs the row. Both are in this one
			// transaction, and the writer goroutine is the only writer.
			res, err := q.b.wconn.ExecContext(context.Background(), `INSERT INTO messages (queue, body, attrs, inserted_at, visible_at, expires_at, lease)
				SELECT ?, body, ?, ?, ?, 0, `+unleased+` FROM messages WHERE id = ? AND queue = ? AND lease = ? AND visible_at > ?`,
				dq.name, attrs, now, now, idOf(m), q.name, tokenOf(m), now)
			if err != nil {
				return fmt.Errorf("copy message %s into %s: %w", m.ID, dq.name, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				lost = true
				return nil
			}
		}
		if lost, err = q.deleteOne(m, now); err != nil || lost {
			if lost && stored {
				return fmt.Errorf("message %s: lease lost between copy and delete", m.ID) // cannot happen: one writer
			}
			return err
		}
		if stored {
			return nil
		}
		if _, err := q.b.stmts.insert.Exec(dq.name, body, attrs, now, now, int64(0)); err != nil {
			return fmt.Errorf("insert into %s: %w", dq.name, err)
		}
		return nil
	}}
	if err := q.b.do(ctx, o); err != nil {
		return q.errf("move to "+dq.name+" from", err)
	}
	if lost {
		return q.lost(m)
	}
	return nil
}
