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
// returns to the head. BenchmarkListenerDrainCeiling sets a drain's rate against what the
// disk's fsync rate would allow at the batching the drain achieved.
//
// A storage error (disk full, I/O error) rolls back the whole group and fails every
// operation in it; the callers' messages are then neither sent, leased nor deleted.
// WAL size is bounded by journal_size_limit after SQLite's automatic checkpoints, a
// TRUNCATE checkpoint on Close, and auto_vacuum=INCREMENTAL returns freed pages bit by bit.
package local

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/internal/clock"
	"github.com/wqhost/wqhost/listener/queue"
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
	// Clock tells the time of leases and delays (the project's one time hook,
	// internal/clock); nil means the system clock. With an injected clock Wait cannot arm
	// timers for leases and delays that expire: call Backend.Notify after advancing it.
	Clock clock.Clock
	// Logger receives maintenance messages; nil means slog.Default().
	Logger *slog.Logger
	// MaxGroup caps how many operations one transaction merges; 0 means 512.
	MaxGroup int
	// MaxBodyBytes is the largest body Send, SendBatch and MoveTo accept and Receive loads;
	// 0 means DefaultMaxBodyBytes. A larger body already in the store (an older store, or a
	// lower limit) is received unloaded (queue.Message.Oversize).
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

// The batch statements lease or delete a whole batch in one statement, prepared once per
// batch size: a statement per message was most of the store's CPU. NOT INDEXED makes SQLite
// find the rows by id (rowid lookups) instead of walking messages_ready past every leased row
// for the queue and visibility terms (see TestBatchStatementsUseRowid).

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
		release                                     *sql.Stmt // updVis that takes the delivery back
		begin, commit, rollback                     *sql.Stmt
	}
	// leaseN, deleteN and deleteTokN are the batch statements by batch size (lease, delete
	// with any tokens, delete with one token), prepared on first use. Only the writer
	// goroutine touches them.
	leaseN, deleteN, deleteTokN map[int]*sql.Stmt
	// orderIndexed is set once the first ordered receive made sure of the order index.
	// Only the writer goroutine touches it.
	orderIndexed bool
	commits      int
}

var (
	_ queue.Backend     = (*Backend)(nil)
	_ queue.Queue       = (*Queue)(nil)
	_ queue.Batcher     = (*Queue)(nil)
	_ queue.Waiter      = (*Queue)(nil)
	_ queue.Watcher     = (*Queue)(nil)
	_ queue.FuncWatcher = (*Queue)(nil)
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
		path: path, db: db, now: time.Now, realClk: opts.Clock == nil, log: opts.Logger, maxGroup: opts.MaxGroup, maxBody: opts.MaxBodyBytes,
		ops: make(chan *op, 1024), closed: make(chan struct{}), done: make(chan struct{}),
		queues: map[string]*Queue{},
		leaseN: map[int]*sql.Stmt{}, deleteN: map[int]*sql.Stmt{}, deleteTokN: map[int]*sql.Stmt{},
	}
	if opts.Clock != nil {
		b.now = opts.Clock.Now
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
	prep(&s.release, `UPDATE messages SET visible_at = ?, lease = ?, dequeue_count = max(dequeue_count - 1, 0) WHERE id = ? AND queue = ? AND lease = ? AND visible_at > ?`)
	prep(&s.insert, `INSERT INTO messages (queue, body, attrs, inserted_at, visible_at, expires_at, lease) VALUES (?, ?, ?, ?, ?, ?, `+unleased+`)`)
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
		b.Notify() // a watcher waiting on a queue's channel learns of the close from its Watch
		<-b.done
		if _, cerr := b.wconn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)"); cerr != nil {
			b.log.Warn("local queue store: checkpoint on close", "path", b.path, "err", cerr)
		}
		for _, cache := range []map[int]*sql.Stmt{b.leaseN, b.deleteN, b.deleteTokN} {
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
func (b *Backend) Open(ctx context.Context, name string) (queue.Queue, error) {
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
		q = &Queue{name: name, b: b}
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

var _ queue.BodyLimiter = (*Queue)(nil)
