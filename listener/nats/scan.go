package nats

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/listener/queue"
)

// Scan implements queue.Scanner by reading the stream by sequence (walk), leasing nothing:
// the scan order is stream order and the cursor the last sequence listed. JetStream cannot
// filter on headers or bodies, so the filter runs here (Filter.Matches) on each message as
// it is read, and only the page is held, bodies cut to their prefix. A page reads the
// stream from its cursor on (Newest: the whole stream below the cursor, keeping the last
// matches): one direct get per message, so it suits the dead-letter queues of thousands
// that a poison policy leaves, not millions. Reading leaves the messages, their leases and
// delivery counts alone, where the contract's fallback would lease them.
func (q *Queue) Scan(ctx context.Context, o queue.ScanOptions, fn func(m *queue.Message, size int64) error) (string, error) {
	var after uint64
	if o.After != "" {
		n, err := strconv.ParseUint(o.After, 10, 64)
		if err != nil {
			return "", fmt.Errorf("nats: %s: cursor %.40q: %w", q.name, o.After, queue.ErrBadCursor)
		}
		after = n
	}
	type found struct {
		m    *queue.Message
		size int64
	}
	var page []found // Newest: the last o.Limit+1 matches below the cursor, oldest first
	next := ""
	from := uint64(0)
	if o.After != "" && !o.Newest {
		from = after + 1
	}
	only, ok := onlySeq(o.Filter)
	if !ok {
		return "", nil
	}
	now := time.Now()
	err := q.walk(ctx, max(from, only), func(raw *jetstream.RawStreamMsg) (bool, error) {
		if o.Newest && o.After != "" && raw.Sequence >= after || only > 0 && raw.Sequence > only {
			return false, nil
		}
		m, ok := q.scanned(raw, o.Filter, now)
		if !ok {
			return true, nil
		}
		if !o.Newest && o.Limit > 0 && len(page) == o.Limit {
			next = page[len(page)-1].m.ID
			return false, nil
		}
		m.Body = append([]byte{}, m.Body[:min(int64(len(m.Body)), max(o.BodyBytes, 0))]...) // not the whole body held
		page = append(page, found{m, int64(len(raw.Data))})
		if o.Newest && o.Limit > 0 && len(page) > o.Limit+1 {
			page = page[1:]
		}
		return true, nil
	})
	if err != nil {
		return "", err
	}
	if o.Newest {
		if o.Limit > 0 && len(page) > o.Limit {
			page = page[1:]
			next = page[0].m.ID
		}
		for i, j := 0, len(page)-1; i < j; i, j = i+1, j-1 {
			page[i], page[j] = page[j], page[i]
		}
	}
	for _, f := range page {
		if err := fn(f.m, f.size); err != nil {
			return "", err
		}
	}
	return next, nil
}

// CountMatching implements queue.Scanner: one read of the stream by sequence.
func (q *Queue) CountMatching(ctx context.Context, f queue.Filter) (int64, error) {
	var n int64
	only, ok := onlySeq(f)
	if !ok {
		return 0, nil
	}
	now := time.Now()
	err := q.walk(ctx, only, func(raw *jetstream.RawStreamMsg) (bool, error) {
		if only > 0 && raw.Sequence > only {
			return false, nil
		}
		if _, ok := q.scanned(raw, f, now); ok {
			n++
		}
		return true, nil
	})
	return n, err
}

// scanned is raw as a scan lists it, if f selects it.
func (q *Queue) scanned(raw *jetstream.RawStreamMsg, f queue.Filter, now time.Time) (*queue.Message, bool) {
	if exp, ok := unixHeader(raw.Header, hdrExpires); f.Live && ok && !now.Before(exp) {
		return nil, false
	}
	m := peeked(q, raw, true)
	return m, f.Matches(m)
}

// onlySeq is the one sequence f.ID selects (0: f selects by other means), so that a read of
// one dead letter by id is one direct get, not a walk of the stream; ok false when f.ID is
// not a sequence of this stream's and selects nothing.
func onlySeq(f queue.Filter) (seq uint64, ok bool) {
	if f.ID == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(f.ID, 10, 64)
	return n, err == nil && n > 0
}
