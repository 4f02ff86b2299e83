package local

import (
	"context"
	"database/sql"
	"math"
	"time"
)

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

// Watch implements queue.Watcher. The channel is closed by a Send or release in this
// process, by the ExternalWatcher when another process sent to the queue, by Backend.Notify,
// and when the Backend closes (a Watch then fails with ErrClosed). visibleIn is -1 for an
// empty queue and, with an injected clock, for one whose messages are all leased or delayed:
// call Backend.Notify after advancing the clock. stop does nothing: the channel costs a
// waiter nothing to drop.
func (q *Queue) Watch(ctx context.Context) (changed <-chan struct{}, visibleIn time.Duration, stop func(), err error) {
	stop = func() {}
	wake := q.wake.Chan() // taken before the reads, so a write or close after them still closes it
	in, err := q.visibleIn(ctx)
	if err != nil {
		return nil, 0, stop, err
	}
	return wake, in, stop, nil
}

// WatchFunc implements queue.FuncWatcher: fn is called once by whatever would close
// Watch's channel (in the writer's goroutine), unless stop is called first. visibleIn is as
// Watch's.
func (q *Queue) WatchFunc(ctx context.Context, fn func()) (visibleIn time.Duration, stop func(), err error) {
	stop = q.wake.Func(fn) // registered before the reads, as Watch takes its channel
	in, err := q.visibleIn(ctx)
	if err != nil {
		stop()
		return 0, func() {}, err
	}
	return in, stop, nil
}

// visibleIn reads how long until a message is visible for Watch and WatchFunc.
func (q *Queue) visibleIn(ctx context.Context) (time.Duration, error) {
	select {
	case <-q.b.closed:
		return 0, q.errf("watch", ErrClosed)
	default:
	}
	next, err := q.nextVisible(ctx)
	if err != nil {
		return 0, err
	}
	now := q.b.now().UnixNano()
	switch {
	case next <= now:
		return 0, nil
	case next == math.MaxInt64 || !q.b.realClk:
		return -1, nil
	}
	return time.Duration(next - now), nil
}

// Wait blocks until a message may be visible, ctx ends, or d elapses (d <= 0: no limit). A
// Send or release in this process wakes it; with the real clock it also wakes when the
// earliest leased or delayed message becomes visible. Messages sent by another process are
// seen when d elapses, or at once with an ExternalWatcher.
func (q *Queue) Wait(ctx context.Context, d time.Duration) error {
	var limit <-chan time.Time
	if d > 0 {
		limit = time.After(d)
	}
	for {
		changed, in, _, err := q.Watch(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil || in == 0:
			// Waking is always safe: the caller's Receive will see the same error.
			return nil
		}
		var visible <-chan time.Time
		if in > 0 {
			visible = time.After(in + time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			if !q.b.realClk {
				return nil
			}
			// A write to the queue, but maybe none that is visible yet (a retry released
			// with a delay): look again rather than have the caller receive nothing, which
			// a listener counts as a spurious wake-up and backs off from.
		case <-visible:
			return nil
		case <-limit:
			return nil
		}
	}
}
