package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/listener/queue"
)

// walk calls fn for the queue's messages in stream order from sequence from on, read by
// sequence (direct get by subject) without leasing them: leased and delayed ones too.
// It stops when fn returns false.
func (q *Queue) walk(ctx context.Context, from uint64, fn func(*jetstream.RawStreamMsg) (bool, error)) error {
	subject := q.subject
	if q.ordered {
		// Group consumers have ack floors of their own; a work-queue stream holds only
		// messages not yet acked anyway.
		from = max(from, 1)
		if q.ownStream {
			subject = ">"
		}
	} else {
		ci, err := q.cons.Info(ctx)
		if err != nil {
			return fmt.Errorf("nats: %s: consumer info: %w", q.name, err)
		}
		from = max(from, ci.AckFloor.Stream+1)
	}
	for {
		raw, err := q.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("nats: %s: get message from sequence %d: %w", q.name, from, err)
		}
		more, err := fn(raw)
		if err != nil || !more {
			return err
		}
		from = raw.Sequence + 1
	}
}

func peeked(q *Queue, raw *jetstream.RawStreamMsg, body bool) *queue.Message {
	m := &queue.Message{ID: strconv.FormatUint(raw.Sequence, 10), Queue: q.name, InsertedAt: raw.Time,
		Attributes: attributesOf(raw.Header)}
	if body {
		m.Body = raw.Data
	}
	if nb, ok := unixHeader(raw.Header, hdrNotBefore); ok && nb.After(time.Now()) {
		m.VisibleAt = nb
	}
	return m
}

// Peek returns up to max (<= 0: all) of the queue's messages in stream order without leasing
// them. DequeueCount is 0: the server keeps delivery counts only for delivered messages and
// tells them only with a delivery.
func (q *Queue) Peek(ctx context.Context, max int) ([]*queue.Message, error) {
	var out []*queue.Message
	err := q.walk(ctx, 0, func(raw *jetstream.RawStreamMsg) (bool, error) {
		if exp, ok := unixHeader(raw.Header, hdrExpires); ok && !time.Now().Before(exp) {
			return true, nil
		}
		out = append(out, peeked(q, raw, true))
		return max <= 0 || len(out) < max, nil
	})
	return out, err
}

// List calls fn for up to max (<= 0: all) messages after the cursor, in stream order, without
// leasing them; a body above maxBody is left unread (Oversize gives its size). It returns the
// cursor that continues the listing when more follow, "" otherwise.
func (q *Queue) List(ctx context.Context, after string, max int, maxBody int64, fn func(*queue.Message) error) (string, error) {
	var from uint64
	if after != "" {
		n, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return "", fmt.Errorf("nats: %s: cursor %.40q: %w", q.name, after, queue.ErrBadCursor)
		}
		from = n + 1
	}
	n := 0
	var last, next string
	err := q.walk(ctx, from, func(raw *jetstream.RawStreamMsg) (bool, error) {
		if max > 0 && n == max {
			next = last
			return false, nil
		}
		m := peeked(q, raw, int64(len(raw.Data)) <= maxBody)
		if m.Body == nil && len(raw.Data) > 0 {
			m.Oversize = int64(len(raw.Data))
		}
		n++
		last = m.ID
		return true, fn(m)
	})
	return next, err
}
