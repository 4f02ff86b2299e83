package adminqueue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

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
// not taken, and one leased at that moment (a reader holds it) is left. On a store with a
// queue.Sweeper (local) it deletes sweepChunk at a time, each chunk one short transaction,
// so a host serving from the store is not held up.
func PurgeDead(ctx context.Context, dead queue.Queue, f Filter, expect, limit int64) (int64, error) {
	left := func(purged int64) int {
		if limit <= 0 {
			return sweepChunk
		}
		return int(min(limit-purged, sweepChunk))
	}
	qf := f.contract()
	if sw, ok := queue.As[queue.Sweeper](dead); ok {
		walk, n, err := sw.Sweep(ctx, qf)
		if err != nil {
			return 0, err
		}
		if n != expect {
			return 0, &CountChangedError{Count: n, Expect: expect}
		}
		var purged int64
		for left(purged) > 0 {
			found, deleted, err := walk.Delete(ctx, left(purged))
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
		if !qf.Matches(m) || left(purged) == 0 {
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

// sweepChunk is how many dead letters a purge or redrive asks a queue.Sweeper for at once:
// the local store's own chunk (local.MatchChunk), one short transaction of its writer.
const sweepChunk = 256

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
// fails again) are not taken. On a store with a queue.Sweeper (local) each chunk moves in
// one transaction inside the store, bodies unread; elsewhere each message is sent again and
// deleted (see RequeueOne) during a scanLeasing walk. It stops at ctx's end.
func RedriveDead(ctx context.Context, dead, dst queue.Queue, f Filter, rate int, limit int64, p *Progress) error {
	left := func() int64 {
		if limit <= 0 {
			return sweepChunk
		}
		return limit - p.Done.Load() - p.Failed.Load()
	}
	if rate <= 0 {
		rate = DefaultRate
	}
	rate = min(rate, MaxRate)
	pace := pacer{start: time.Now(), rate: float64(rate)}
	qf := f.contract()
	if sw, ok := queue.As[queue.Sweeper](dead); ok {
		walk, n, err := sw.Sweep(ctx, qf)
		if err != nil {
			return err
		}
		if limit > 0 {
			n = min(n, limit)
		}
		p.Matched.Store(n)
		chunk := int64(min(max(rate/10, 1), sweepChunk))
		for left() > 0 {
			found, moved, err := walk.MoveTo(ctx, int(min(chunk, left())), dst, deadLetterKeys)
			if errors.Is(err, errors.ErrUnsupported) {
				return fmt.Errorf("redrive %s to %s: not queues of one store", dead.Name(), dst.Name())
			}
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
		if !qf.Matches(m) || left() <= 0 {
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
