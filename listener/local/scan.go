package local

import (
	"context"
	"errors"
	"strconv"

	"github.com/wqhost/wqhost/listener/queue"
)

// matchOf is f as a Match; ok false when f selects nothing here (an id this store never
// gives).
func matchOf(f queue.Filter) (m Match, ok bool) {
	m = Match{From: f.From, To: f.To, Body: f.Body, Live: f.Live}
	if f.ID != "" {
		id, err := strconv.ParseInt(f.ID, 10, 64)
		if err != nil || id <= 0 {
			return Match{}, false
		}
		m.ID = id
	}
	for _, a := range f.Attrs {
		m.Attrs = append(m.Attrs, AttrMatch(a))
	}
	return m, true
}

// Scan implements queue.Scanner with Select: the filter runs in SQL, the page walks the
// messages_ready index from its cursor, and only each body's prefix reaches Go. The scan
// order is receive order, (visible_at, id); a dead letter's visible_at is when it was
// dead-lettered (0 once a reader that leased it released it).
func (q *Queue) Scan(ctx context.Context, o queue.ScanOptions, fn func(m *queue.Message, size int64) error) (string, error) {
	m, ok := matchOf(o.Filter)
	if !ok {
		return "", nil
	}
	return q.Select(ctx, m, Page{After: o.After, Limit: o.Limit, Newest: o.Newest}, max(o.BodyBytes, 0), func(r *Row) error {
		return fn(&r.Message, r.Size)
	})
}

// CountMatching implements queue.Scanner with Count: without attribute, time or body
// conditions it reads the queue's index only.
func (q *Queue) CountMatching(ctx context.Context, f queue.Filter) (int64, error) {
	m, ok := matchOf(f)
	if !ok {
		return 0, nil
	}
	return q.Count(ctx, m)
}

// Sweep implements queue.Sweeper with DeleteMatching and MoveMatching (MatchChunk at most
// per chunk), bounded to the ids in the store when it starts (LastID), so messages sent
// while it runs are not taken.
func (q *Queue) Sweep(ctx context.Context, f queue.Filter) (queue.Sweep, int64, error) {
	m, ok := matchOf(f)
	if !ok {
		return &sweep{q: q, none: true}, 0, nil
	}
	last, err := q.b.LastID(ctx)
	if err != nil {
		return nil, 0, err
	}
	m.MaxID = max(last, 1)
	n, err := q.Count(ctx, m)
	if err != nil {
		return nil, 0, err
	}
	return &sweep{q: q, m: m}, n, nil
}

type sweep struct {
	q    *Queue
	m    Match
	c    Cursor
	none bool // the filter selects nothing here
}

func (s *sweep) Delete(ctx context.Context, n int) (found, deleted int, err error) {
	if s.none {
		return 0, 0, nil
	}
	return s.q.DeleteMatching(ctx, s.m, &s.c, n)
}

func (s *sweep) MoveTo(ctx context.Context, n int, dst queue.Queue, drop []string) (found, moved int, err error) {
	dq, ok := queue.Unwrap(dst).(*Queue)
	if !ok || dq.b != s.q.b {
		return 0, 0, errors.ErrUnsupported
	}
	if s.none {
		return 0, 0, nil
	}
	return s.q.MoveMatching(ctx, s.m, &s.c, n, dq, drop)
}
