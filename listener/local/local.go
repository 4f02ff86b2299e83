// Package local is wqhost's embedded, durable queue backend: many named queues in one SQLite
// file (modernc.org/sqlite, pure Go, WAL journal).
//
// Durability. With SyncFull (the default) every acknowledged Send, Delete and visibility
// change survives a process crash and a power loss: each commit is fsynced. SyncNormal fsyncs
// only at WAL checkpoints: an acknowledged change survives a process crash (SIGKILL, panic)
// but the last commits may be lost on power loss or an OS crash; it is 2-3x faster.
//
// Throughput. One commit costs about one fsync (0.2-0.4 ms), so a single writer goroutine
// merges every concurrent caller's receives, deletes, visibility changes and sends into one
// transaction (group commit). A receive leases its whole batch, and a batched delete
// removes its whole batch, with one statement each. Messages are received in (visible_at,
// id) order through an index on (queue, visible_at, id): best-effort FIFO that never scans
// past leased rows. A released message (UpdateVisibility 0) gets visible_at 0 and so
// returns to the head.
//
// A storage error (disk full, I/O error) rolls back the whole group and fails every
// operation in it; the callers' messages are then neither sent, leased nor deleted.
// WAL size is bounded by journal_size_limit after SQLite's automatic checkpoints, a
// TRUNCATE checkpoint on Close, and auto_vacuum=INCREMENTAL returns freed pages bit by bit.
package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/internal/wait"
	"github.com/wqhost/wqhost/listener"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Sync selects how commits reach the disk.
type Sync int

const (
	// SyncFull fsyncs every commit: survives process crashes and power loss. The default.
	SyncFull Sync = iota
	// SyncNormal fsyncs at checkpoints only: survives process crashes, may lose the last
	// commits on power loss or OS crash.
	SyncNormal
)

func (s Sync) pragma() (string, error) {
	switch s {
	case SyncFull:
		return "FULL", nil
	case SyncNormal:
		return "NORMAL", nil
	}
	return "", fmt.Errorf("unknown sync mode %d", int(s))
}

// Options configure a Backend.
type Options struct {
	// Sync is the durability mode; the zero value is SyncFull.
	Sync Sync
	// Now is the clock; nil means time.Now. With an injected clock Wait cannot arm timers
	// for leases and delays that expire: call Backend.Notify after advancing the clock.
	Now func() time.Time
	// Logger receives maintenance messages; nil means slog.Default().
	Logger *slog.Logger
	// MaxGroup caps how many operations one transaction merges; 0 means 512.
	MaxGroup int
	// MaxBodyBytes is the largest body Send, SendBatch and MoveTo accept and Receive loads;
	// 0 means DefaultMaxBodyBytes. A larger body already in the store (an older store, or a
	// lower limit) is received unloaded (listener.Message.Oversize).
	MaxBodyBytes int64
}

// DefaultMaxBodyBytes is the default of Options.MaxBodyBytes: the largest
// limits.max_message_bytes a config may set.
const DefaultMaxBodyBytes = 64 << 20

// ErrTooLarge is returned by Send, SendBatch and MoveTo for a body above the store's
// MaxBodyBytes.
var ErrTooLarge = errors.New("body above the store's limit")

// walLimit bounds the WAL file: after each checkpoint SQLite truncates it to this size, so
// the WAL does not stay at its peak after a burst.
const walLimit = 64 << 20

const schema = `
CREATE TABLE IF NOT EXISTS messages (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	queue         TEXT    NOT NULL,
	body          BLOB    NOT NULL,
	attrs         TEXT,
	inserted_at   INTEGER NOT NULL,
	visible_at    INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL DEFAULT 0,
	dequeue_count INTEGER NOT NULL DEFAULT 0,
	lease         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_ready ON messages (queue, visible_at, id);
`

// selectReadySQL must be served by messages_ready in index order: a scan in id order would
// walk past every leased row (see TestReceiveUsesReadyIndex).
// Its first parameter is the largest body it loads: a larger one is not read (SQLite reads a
// blob's length without its content), see bodyColumns.
const selectReadySQL = `SELECT id, ` + bodyColumns + `, attrs, inserted_at, dequeue_count, expires_at FROM messages
	WHERE queue = ? AND visible_at <= ? ORDER BY visible_at, id LIMIT ?`

// bodyColumns selects a message's body only when it is at most the query's first parameter
// in bytes (NULL otherwise), and its length: a receive or list never loads a body it will
// not hand out.
const bodyColumns = `CASE WHEN length(body) <= ?1 THEN body END, length(body)`

// The batch statements lease or delete a whole batch in one statement, prepared once per
// batch size: a statement per message was most of the store's CPU. NOT INDEXED makes SQLite
// find the rows by id (rowid lookups) instead of walking messages_ready past every leased row
// for the queue and visibility terms (see TestBatchStatementsUseRowid).

// leaseSQL leases n messages (visible_at, lease token) by id. OR FAIL spares SQLite the
// statement journal that undoes a half-done multi-row statement (a copy of every page it
// touches): nothing here can fail halfway but a storage error, and that rolls back the whole
// group anyway.
func leaseSQL(n int) string {
	return "UPDATE OR FAIL messages NOT INDEXED SET visible_at = ?, lease = ?, dequeue_count = dequeue_count + 1 WHERE id IN (" +
		placeholders(n, "?") + ")"
}

// deleteLeasedSQL deletes those of n leased messages whose lease is still held (same queue,
// same token, not expired) and returns their ids.
func deleteLeasedSQL(n int) string {
	return "DELETE FROM messages NOT INDEXED WHERE id IN (" + placeholders(n, "?") +
		") AND queue = ? AND visible_at > ? AND (id, lease) IN (VALUES " + placeholders(n, "(?, ?)") + ") RETURNING id"
}

func placeholders(n int, p string) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(p)
	}
	return sb.String()
}

// Backend is an open queue store. It is safe for concurrent use.
type Backend struct {
	path     string
	maxBody  int64
	db       *sql.DB
	wconn    *sql.Conn
	now      func() time.Time
	realClk  bool
	log      *slog.Logger
	maxGroup int

	ops    chan *op
	closed chan struct{} // closed by Close: no new ops
	done   chan struct{} // closed when the writer goroutine exits
	once   sync.Once

	lease atomic.Int64 // lease token source, seeded from the wall clock so tokens differ across restarts

	mu     sync.Mutex
	queues map[string]*Queue

	stmts struct {
		selectReady, del, delLeased, updVis, insert *sql.Stmt
		begin, commit, rollback                     *sql.Stmt
	}
	// leaseN and deleteN are the batch statements by batch size, prepared on first use.
	// Only the writer goroutine touches them.
	leaseN, deleteN map[int]*sql.Stmt
	// orderIndexed is set once the first ordered receive made sure of the order index.
	// Only the writer goroutine touches it.
	orderIndexed bool
	commits      int
}

var (
	_ listener.Backend = (*Backend)(nil)
	_ listener.Queue   = (*Queue)(nil)
	_ listener.Batcher = (*Queue)(nil)
	_ listener.Waiter  = (*Queue)(nil)
)

// ErrClosed is returned by operations on a closed Backend.
var ErrClosed = errors.New("local queue store closed")

// Open opens (creating if needed) the store at path.
func Open(ctx context.Context, path string, opts Options) (*Backend, error) {
	syncMode, err := opts.Sync.pragma()
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w", path, err)
	}
	q := url.Values{}
	for _, p := range []string{
		"busy_timeout(10000)",
		"auto_vacuum(INCREMENTAL)", // only effective on a new file: before the table exists
		"journal_mode(WAL)",
		"synchronous(" + syncMode + ")",
		"journal_size_limit(" + strconv.Itoa(walLimit) + ")",
	} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	b := &Backend{
		path: path, db: db, now: opts.Now, log: opts.Logger, maxGroup: opts.MaxGroup, maxBody: opts.MaxBodyBytes,
		ops: make(chan *op, 1024), closed: make(chan struct{}), done: make(chan struct{}),
		queues: map[string]*Queue{},
		leaseN: map[int]*sql.Stmt{}, deleteN: map[int]*sql.Stmt{},
	}
	if b.now == nil {
		b.now, b.realClk = time.Now, true
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	if b.maxGroup <= 0 {
		b.maxGroup = 512
	}
	if b.maxBody <= 0 {
		b.maxBody = DefaultMaxBodyBytes
	}
	b.lease.Store(time.Now().UnixNano())
	if err := b.init(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("local: open %s: %w", path, err)
	}
	go b.writer()
	return b, nil
}

func (b *Backend) init(ctx context.Context) error {
	if _, err := b.db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	c, err := b.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("writer connection: %w", err)
	}
	b.wconn = c
	prep := func(dst **sql.Stmt, q string) {
		if err != nil {
			return
		}
		*dst, err = c.PrepareContext(ctx, q)
	}
	s := &b.stmts
	prep(&s.selectReady, selectReadySQL)
	prep(&s.del, `DELETE FROM messages WHERE id = ?`)
	prep(&s.delLeased, `DELETE FROM messages WHERE id = ? AND queue = ? AND lease = ? AND visible_at > ?`)
	prep(&s.updVis, `UPDATE messages SET visible_at = ?, lease = ? WHERE id = ? AND queue = ? AND lease = ? AND visible_at > ?`)
	prep(&s.insert, `INSERT INTO messages (queue, body, attrs, inserted_at, visible_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`)
	prep(&s.begin, "BEGIN IMMEDIATE")
	prep(&s.commit, "COMMIT")
	prep(&s.rollback, "ROLLBACK")
	if err != nil {
		c.Close()
		return fmt.Errorf("prepare statements: %w", err)
	}
	return nil
}

// batchStmt returns the statement for n messages from cache, preparing it on first use.
// Only the writer goroutine calls it.
func (b *Backend) batchStmt(cache map[int]*sql.Stmt, n int, build func(int) string) (*sql.Stmt, error) {
	if st, ok := cache[n]; ok {
		return st, nil
	}
	st, err := b.wconn.PrepareContext(context.Background(), build(n))
	if err != nil {
		return nil, fmt.Errorf("prepare batch statement for %d messages: %w", n, err)
	}
	cache[n] = st
	return st, nil
}

// Close stops the writer after the queued operations and closes the file.
func (b *Backend) Close() error {
	var err error
	b.once.Do(func() {
		close(b.closed)
		<-b.done
		if _, cerr := b.wconn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)"); cerr != nil {
			b.log.Warn("local queue store: checkpoint on close", "path", b.path, "err", cerr)
		}
		for _, cache := range []map[int]*sql.Stmt{b.leaseN, b.deleteN} {
			for _, st := range cache {
				st.Close()
			}
		}
		err = errors.Join(b.wconn.Close(), b.db.Close())
		if err != nil {
			err = fmt.Errorf("local: close %s: %w", b.path, err)
		}
	})
	return err
}

// Open returns the named queue. Queues exist implicitly: opening creates nothing on disk.
func (b *Backend) Open(ctx context.Context, name string) (listener.Queue, error) {
	return b.Queue(ctx, name)
}

// Queue is Open with the concrete type.
func (b *Backend) Queue(_ context.Context, name string) (*Queue, error) {
	if name == "" {
		return nil, fmt.Errorf("local: open queue in %s: empty name", b.path)
	}
	select {
	case <-b.closed:
		return nil, fmt.Errorf("local: open queue %q: %w", name, ErrClosed)
	default:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	q, ok := b.queues[name]
	if !ok {
		q = &Queue{name: name, b: b, wake: make(chan struct{})}
		b.queues[name] = q
	}
	return q, nil
}

// Notify wakes every waiter of every queue so that they re-check visibility. Tests with an
// injected clock call it after advancing the clock.
func (b *Backend) Notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range b.queues {
		q.broadcast()
	}
}

// op is one caller's request to the writer. apply runs inside the group transaction and
// returns only storage errors; logical outcomes (lease lost) go in the op's own results.
type op struct {
	apply func(now int64) error
	err   error
	done  chan struct{}
	wakes *Queue // queue whose waiters to wake after commit
}

func (b *Backend) do(ctx context.Context, o *op) error {
	o.done = make(chan struct{})
	select {
	case b.ops <- o:
	case <-b.closed:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-o.done:
		return o.err
	case <-b.done:
		// The writer may have exited with o still buffered.
		select {
		case <-o.done:
			return o.err
		default:
			return ErrClosed
		}
	}
}

func (b *Backend) writer() {
	defer close(b.done)
	group := make([]*op, 0, b.maxGroup)
	for {
		group = group[:0]
		select {
		case o := <-b.ops:
			group = append(group, o)
		case <-b.closed:
			// Finish what is already queued, then stop.
			for {
				select {
				case o := <-b.ops:
					b.commit([]*op{o})
				default:
					return
				}
			}
		}
	fill:
		for len(group) < b.maxGroup {
			select {
			case o := <-b.ops:
				group = append(group, o)
			default:
				break fill
			}
		}
		b.commit(group)
	}
}

func (b *Backend) commit(group []*op) {
	ctx := context.Background()
	now := b.now().UnixNano()
	err := func() error {
		if _, err := b.stmts.begin.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		for _, o := range group {
			if err := o.apply(now); err != nil {
				if _, rerr := b.stmts.rollback.Exec(); rerr != nil {
					b.log.Error("local queue store: rollback", "path", b.path, "err", rerr)
				}
				return err
			}
		}
		if _, err := b.stmts.commit.Exec(); err != nil {
			if _, rerr := b.stmts.rollback.Exec(); rerr != nil {
				b.log.Debug("local queue store: rollback after failed commit", "path", b.path, "err", rerr)
			}
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	}()
	if err != nil {
		err = fmt.Errorf("local: %s: group of %d operations: %w", b.path, len(group), err)
	}
	var woken []*Queue // few queues per group: a slice beats a map
	for _, o := range group {
		if err != nil {
			o.err = err
		}
		if err == nil && o.wakes != nil && !slices.Contains(woken, o.wakes) {
			woken = append(woken, o.wakes)
			o.wakes.broadcast()
		}
		close(o.done)
	}
	b.commits++
	if b.commits%4096 == 0 {
		// Return free pages to the file system bit by bit; auto_vacuum is INCREMENTAL.
		if _, err := b.wconn.ExecContext(ctx, "PRAGMA incremental_vacuum(2048)"); err != nil {
			b.log.Warn("local queue store: incremental vacuum", "path", b.path, "err", err)
		}
	}
}

func (b *Backend) nextLease() int64 { return b.lease.Add(1) }

// Queue is one named queue in the store.
type Queue struct {
	name string
	b    *Backend

	mu   sync.Mutex
	wake chan struct{} // closed and replaced to wake all waiters
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

func (q *Queue) broadcast() {
	q.mu.Lock()
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

func (q *Queue) errf(what string, err error) error {
	return fmt.Errorf("local: %s %s: %w", what, q.name, err)
}

// Receive leases up to max visible messages in (visible_at, id) order. A body above the
// store's MaxBodyBytes is not loaded (see ReceiveLimited).
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*listener.Message, error) {
	return q.ReceiveLimited(ctx, max, visibility, q.b.maxBody)
}

var _ listener.BodyLimiter = (*Queue)(nil)

// ReceiveLimited implements listener.BodyLimiter: it is Receive, loading only bodies of at
// most maxBody bytes (and at most the store's MaxBodyBytes); a larger one is leased with Body
// nil and Oversize set to its size, read neither from disk nor into memory. MoveTo moves such
// a message with its stored body.
func (q *Queue) ReceiveLimited(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*listener.Message, error) {
	maxBody = min(maxBody, q.b.maxBody)
	if max < 1 {
		return nil, fmt.Errorf("local: receive from %s: max %d < 1", q.name, max)
	}
	max = min(max, listener.MaxBatch)
	out := make([]*listener.Message, 0, max)
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
func idOf(m *listener.Message) int64 {
	id, _, ok := parseLease(m)
	if !ok {
		return -1
	}
	return id
}

func tokenOf(m *listener.Message) int64 {
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

func parseLease(m *listener.Message) (id, tok int64, ok bool) {
	id, err1 := strconv.ParseInt(m.ID, 10, 64)
	tok, err2 := strconv.ParseInt(m.LeaseToken, 36, 64)
	return id, tok, err1 == nil && err2 == nil
}

func (q *Queue) deleteOne(m *listener.Message, now int64) (lost bool, err error) {
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
func (q *Queue) deleteChunk(ms []*listener.Message, errs []error, now int64) error {
	var idBuf [listener.MaxBatch]int64
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
		st, err := q.b.batchStmt(q.b.deleteN, len(ids), deleteLeasedSQL)
		if err != nil {
			return fmt.Errorf("delete messages in %s: %w", q.name, err)
		}
		args := make([]any, 0, 3*len(ids)+2)
		for _, id := range ids {
			args = append(args, id)
		}
		args = append(args, q.name, now)
		args = append(args, pairs...)
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

func (q *Queue) lost(m *listener.Message) error {
	return fmt.Errorf("local: message %s in %s: %w", m.ID, q.name, listener.ErrLeaseLost)
}

// Delete removes a leased message; ErrLeaseLost if its lease expired or was replaced.
func (q *Queue) Delete(ctx context.Context, m *listener.Message) error {
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
func (q *Queue) DeleteBatch(ctx context.Context, ms []*listener.Message) []error {
	errs := make([]error, len(ms))
	o := &op{apply: func(now int64) error {
		for start := 0; start < len(ms); start += listener.MaxBatch {
			if err := q.deleteChunk(ms[start:min(start+listener.MaxBatch, len(ms))], errs[start:], now); err != nil {
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
func (q *Queue) UpdateVisibility(ctx context.Context, m *listener.Message, d time.Duration) error {
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
		res, err := q.b.stmts.updVis.Exec(vis, tok, id, q.name, old, now)
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

// MoveTo implements listener.Mover: it inserts body into dl and deletes the leased m in one
// transaction, so a message is dead-lettered exactly once per lease (never twice by a
// redelivered copy, never lost). It fails with ErrLeaseLost, inserting nothing, when m's
// lease is no longer held, and with errors.ErrUnsupported when dl is not a queue of this
// store.
func (q *Queue) MoveTo(ctx context.Context, m *listener.Message, dl listener.Queue, body []byte, opts listener.SendOptions) error {
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
			res, err := q.b.wconn.ExecContext(context.Background(), `INSERT INTO messages (queue, body, attrs, inserted_at, visible_at, expires_at)
				SELECT ?, body, ?, ?, ?, 0 FROM messages WHERE id = ? AND queue = ? AND lease = ? AND visible_at > ?`,
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

// Send enqueues a message and returns its id once committed. A body above the store's
// MaxBodyBytes is refused with ErrTooLarge.
func (q *Queue) Send(ctx context.Context, body []byte, opts listener.SendOptions) (string, error) {
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
func (q *Queue) SendBatch(ctx context.Context, bodies [][]byte, opts listener.SendOptions) ([]string, error) {
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

// nextVisible returns the earliest visible_at in the queue, or MaxInt64 when it is empty.
func (q *Queue) nextVisible(ctx context.Context) (int64, error) {
	var v sql.NullInt64
	if err := q.b.db.QueryRowContext(ctx, `SELECT min(visible_at) FROM messages WHERE queue = ?`, q.name).Scan(&v); err != nil {
		return 0, q.errf("next visible time of", err)
	}
	if !v.Valid {
		return math.MaxInt64, nil
	}
	return v.Int64, nil
}

// Wait blocks until a message may be visible, ctx ends, or d elapses (d <= 0: no limit). A
// Send or release in this process wakes it; with the real clock it also wakes when the
// earliest leased or delayed message becomes visible. Messages sent by another process are
// seen when d elapses.
func (q *Queue) Wait(ctx context.Context, d time.Duration) error {
	q.mu.Lock()
	wake := q.wake // taken before the check so a Send committed after it still wakes us
	q.mu.Unlock()
	next, err := q.nextVisible(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Waking is always safe: the caller's Receive will see the same error.
		return nil
	}
	now := q.b.now().UnixNano()
	if next <= now {
		return nil
	}
	if q.b.realClk && next != math.MaxInt64 {
		if until := time.Duration(next-now) + time.Millisecond; d <= 0 || until < d {
			d = until
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-wait.Timeout(d):
	case <-q.b.closed:
	}
	return nil
}

// scanReady reads the rows of a receive query (id, body or NULL, body length, attributes,
// inserted_at, dequeue_count, expires_at) into messages leased at now, appending them to out and their
// ids to ids, and sets aside the ids of expired ones. It closes rows.
func (q *Queue) scanReady(rows *sql.Rows, now int64, out []*listener.Message, ids []int64) (_ []*listener.Message, _, expired []int64, err error) {
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
			m                  listener.Message
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
