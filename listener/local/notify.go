package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settleFor is how long the watcher keeps re-checking after a WAL write. A writer's last
// write() to the WAL (the event) comes before its fsync and before it publishes the commit in
// the shared-memory index, so a check right at the event can miss the commit it announces.
// Re-checks run at minGap, 2·minGap, 4·minGap … after the last event, until settleFor has
// passed.
const settleFor = 500 * time.Millisecond

// minGap is the least time between two checks, and the watcher reads no events during it. The
// host's own commits write the WAL too, and SQLite writes each WAL frame with its own write(),
// so a busy host raises thousands of events a second. Not reading for minGap lets the kernel
// merge the identical events queued meanwhile into one and bounds the checks to a few hundred
// cheap queries a second; a wake-up is at most minGap later. With it (and newRowsSQL on the
// rowid range) a host-like workload runs as fast watched as unwatched (BenchmarkWatchOverhead).
const minGap = 5 * time.Millisecond

// newRowsSQL lists the queues that got rows after an id. NOT INDEXED keeps the planner on the
// rowid range: for GROUP BY queue it would otherwise walk the whole messages_ready index in
// queue order, a full scan per check (TestNewRowsUsesRowidRange).
const newRowsSQL = `SELECT queue, max(id) FROM messages NOT INDEXED WHERE id > ? GROUP BY queue`

// ExternalWatcher wakes this Backend's waiters when another process (or another Backend on
// the same file) commits new messages. Create it with Backend.WatchExternal.
//
// Why a file watch: another process's commit is invisible to this process until it reads the
// file, and polling (even PRAGMA data_version, a cheap read) costs a query per interval and
// adds up to one interval of latency. The WAL is written on every commit, so an fsnotify watch
// on it (inotify on Linux) costs nothing while the store is idle and reacts within the
// commit's own fsync (BenchmarkExternalWake: a few ms from Send to the woken Wait). On an
// event the watcher reads which queues got new rows since the last check (newRowsSQL, a rowid
// range: ids only grow, since the table is AUTOINCREMENT and SQLite serialises writers) and
// wakes only those queues. Its own process's receives, deletes and lease updates write the WAL
// too; they cost at most one such range query per minGap and wake nobody.
type ExternalWatcher struct {
	b    *Backend
	fw   *fsnotify.Watcher
	wal  string
	last int64

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// WatchExternal starts watching the store's WAL file for commits made by other processes
// (`wqhost send` next to a running `wqhost run`), so that Wait returns at once instead of when
// its timeout elapses. The watch stops with Close or when the Backend closes.
func (b *Backend) WatchExternal(ctx context.Context) (*ExternalWatcher, error) {
	var last int64
	if err := b.db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM messages`).Scan(&last); err != nil {
		return nil, fmt.Errorf("local: watch %s: read last id: %w", b.path, err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("local: watch %s: %w", b.path, err)
	}
	// The directory, not the WAL file itself: SQLite deletes the WAL when the last connection
	// closes and creates it anew, and a watch on a deleted file is gone for good.
	dir := filepath.Dir(b.path)
	if err := fw.Add(dir); err != nil {
		fw.Close()
		return nil, fmt.Errorf("local: watch %s: directory %s: %w", b.path, dir, err)
	}
	w := &ExternalWatcher{
		b: b, fw: fw, wal: filepath.Base(b.path) + "-wal", last: last,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go w.run()
	return w, nil
}

// Close stops the watch and waits for its goroutine.
func (w *ExternalWatcher) Close() error {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
	return nil
}

func (w *ExternalWatcher) run() {
	defer close(w.done)
	defer w.fw.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var (
		lastEvent  time.Time     // when the last WAL event came
		step       time.Duration // settle re-checks run at lastEvent + minGap, +2·minGap, +4·minGap …
		nextSettle time.Time
		cooling    bool // a check ran less than minGap ago: leave events queued
	)
	check := func() {
		w.check()
		cooling = true
		timer.Reset(minGap)
	}
	event := func() {
		lastEvent, step = time.Now(), minGap
		nextSettle = lastEvent.Add(step)
		check()
	}
	for {
		events := w.fw.Events
		if cooling {
			events = nil
		}
		select {
		case <-w.stop:
			return
		case <-w.b.closed:
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if filepath.Base(ev.Name) != w.wal || !ev.Has(fsnotify.Write|fsnotify.Create) {
				continue
			}
			event()
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			// An overflowed event queue may have dropped a WAL write: check as if one came.
			w.b.log.Warn("local queue store: file watch", "path", w.b.path, "err", err)
			event()
		case <-timer.C:
			cooling = false
			now := time.Now()
			if lastEvent.IsZero() || now.Sub(lastEvent) >= settleFor {
				continue
			}
			if now.Before(nextSettle) {
				timer.Reset(nextSettle.Sub(now))
				continue
			}
			step *= 2
			nextSettle = lastEvent.Add(step)
			check()
		}
	}
}

// check wakes the waiters of every queue that got messages since the last check.
func (w *ExternalWatcher) check() {
	ctx := context.Background()
	rows, err := w.b.db.QueryContext(ctx, newRowsSQL, w.last)
	if err != nil {
		select {
		case <-w.b.closed:
		default:
			w.b.log.Warn("local queue store: check for external commits", "path", w.b.path, "err", err)
		}
		return
	}
	var names []string
	for rows.Next() {
		var (
			name string
			id   int64
		)
		if err := rows.Scan(&name, &id); err != nil {
			break
		}
		names = append(names, name)
		w.last = max(w.last, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		w.b.log.Warn("local queue store: check for external commits", "path", w.b.path, "err", err)
	}
	if len(names) == 0 {
		return
	}
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	for _, n := range names {
		if q, ok := w.b.queues[n]; ok {
			q.broadcast()
		}
	}
}
