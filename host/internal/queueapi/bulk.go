package queueapi

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// CountChangedError refuses a purge whose confirmation no longer holds: the filter selects
// Count dead letters now, not the Expect the caller confirmed.
type CountChangedError struct{ Count, Expect int64 }

func (e *CountChangedError) Error() string {
	return fmt.Sprintf("the filter selects %d dead letters now, not the %d confirmed: count again and confirm that", e.Count, e.Expect)
}

// PurgeDead deletes the dead letters of dead that f selects (at most limit of them; 0: all),
// if there are expect of them (the count a dry run showed and a user confirmed; else a
// *CountChangedError and nothing is deleted), and returns how many it deleted. Dead letters that arrive while it runs are
// not taken, and one leased at that moment (a reader holds it) is left. On the local store
// it deletes MatchChunk at a time, each chunk one short transaction, so a host serving from
// the store is not held up.
func PurgeDead(ctx context.Context, dead queue.Queue, f Filter, expect, limit int64) (int64, error) {
	left := func(purged int64) int {
		if limit <= 0 {
			return local.MatchChunk
		}
		return int(min(limit-purged, local.MatchChunk))
	}
	if lq, ok := dead.(*local.Queue); ok {
		m, n, err := snapshot(ctx, lq, f)
		if err != nil {
			return 0, err
		}
		if n != expect {
			return 0, &CountChangedError{Count: n, Expect: expect}
		}
		var purged int64
		var c local.Cursor
		for left(purged) > 0 {
			found, deleted, err := lq.DeleteMatching(ctx, m, &c, left(purged))
			purged += int64(deleted)
			if err != nil || found == 0 {
				return purged, err
			}
		}
		return purged, nil
	}
	n, err := CountDead(ctx, dead, f)
	if err != nil {
		return 0, err
	}
	if n != expect {
		return 0, &CountChangedError{Count: n, Expect: expect}
	}
	var purged int64
	err = scanLeasing(ctx, dead, func(m *queue.Message) (bool, error) {
		if !f.matches(m) || left(purged) == 0 {
			return false, nil
		}
		if err := dead.Delete(ctx, m); err != nil {
			return false, fmt.Errorf("purge %s: %w", m.ID, err)
		}
		purged++
		return true, nil
	})
	return purged, err
}

// snapshot is f on the local store bounded to the dead letters there now, and their count.
func snapshot(ctx context.Context, lq *local.Queue, f Filter) (local.Match, int64, error) {
	last, err := lq.Backend().LastID(ctx)
	if err != nil {
		return local.Match{}, 0, err
	}
	m := f.local(max(last, 1))
	n, err := lq.Count(ctx, m)
	return m, n, err
}

// Progress are a redrive's counters, read while it runs.
type Progress struct {
	// Matched is how many dead letters the filter selected when the redrive started.
	Matched atomic.Int64
	// Done counts the dead letters moved back; Failed those that could not be (leased by
	// someone else meanwhile, or an error).
	Done, Failed atomic.Int64
}

// DefaultRate is a redrive's default pace in messages per second.
const DefaultRate = 500

// MaxRate caps a redrive's pace.
const MaxRate = 100000

// RedriveDead moves the dead letters of dead that f selects (at most limit of them; 0: all)
// back to dst (their original queue) at rate messages per second (0 = DefaultRate), each with its original attributes
// (the dead-letter bookkeeping dropped, as RequeueDeadLetters does) and a fresh dequeue
// count, counting into p. Dead letters that arrive while it runs (a redriven message that
// fails again) are not taken. On the local store each chunk moves in one transaction inside
// the store, bodies unread; elsewhere each message is sent again and deleted (see
// requeueOne) during a scanLeasing walk. It stops at ctx's end.
func RedriveDead(ctx context.Context, dead, dst queue.Queue, f Filter, rate int, limit int64, p *Progress) error {
	left := func() int64 {
		if limit <= 0 {
			return local.MatchChunk
		}
		return limit - p.Done.Load() - p.Failed.Load()
	}
	if rate <= 0 {
		rate = DefaultRate
	}
	rate = min(rate, MaxRate)
	pace := pacer{start: time.Now(), rate: float64(rate)}
	if lq, ok := dead.(*local.Queue); ok {
		ldst, ok := dst.(*local.Queue)
		if !ok || ldst.Backend() != lq.Backend() {
			return fmt.Errorf("redrive %s to %s: not queues of one store", dead.Name(), dst.Name())
		}
		m, n, err := snapshot(ctx, lq, f)
		if err != nil {
			return err
		}
		if limit > 0 {
			n = min(n, limit)
		}
		p.Matched.Store(n)
		chunk := int64(min(max(rate/10, 1), local.MatchChunk))
		var c local.Cursor
		for left() > 0 {
			found, moved, err := lq.MoveMatching(ctx, m, &c, int(min(chunk, left())), ldst, deadLetterKeys)
			p.Done.Add(int64(moved))
			p.Failed.Add(int64(found - moved))
			if err != nil || found == 0 {
				return err
			}
			if err := pace.wait(ctx, p.Done.Load()+p.Failed.Load()); err != nil {
				return err
			}
		}
		return nil
	}
	n, err := CountDead(ctx, dead, f)
	if err != nil {
		return err
	}
	if limit > 0 {
		n = min(n, limit)
	}
	p.Matched.Store(n)
	requeued := map[string]bool{}
	return scanLeasing(ctx, dead, func(m *queue.Message) (bool, error) {
		if !f.matches(m) || left() <= 0 {
			return false, nil
		}
		if err := pace.wait(ctx, p.Done.Load()+p.Failed.Load()); err != nil {
			return false, err
		}
		if err := RequeueOne(ctx, dead, dst, dst.Name(), m, requeued); err != nil {
			p.Failed.Add(1)
			if errors.Is(err, queue.ErrLeaseLost) {
				return true, nil // gone from our hands: nothing to release
			}
			return false, err
		}
		p.Done.Add(1)
		return true, nil
	})
}

// pacer spaces work at rate per second from start.
type pacer struct {
	start time.Time
	rate  float64
}

// wait returns when done items are due at the pace, or at ctx's end.
func (p pacer) wait(ctx context.Context, done int64) error {
	d := time.Until(p.start.Add(time.Duration(float64(done) / p.rate * float64(time.Second))))
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
