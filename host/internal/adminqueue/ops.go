// Package adminqueue are the operations the admin API runs on a tenant's queues, opened on a
// running host's own backends: send, peek, and the dead letters' filtered listing, count,
// purge and rate-limited redrive (run as jobs, see Jobs). It reaches a store only through
// the queue contract (listener/queue): where the store has a queue.Scanner and a
// queue.Sweeper, filters run in the store and bodies are read only as far as they are shown
// (the local store: in SQL); elsewhere dead letters are scanned by leasing them
// (scanLeasing). The CLI's operations without a host (host/internal/offlinepoison) share the
// requeue of one dead letter (RequeueOne).
package adminqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// peekLease is how long a scan holds the dead letters it leased before releasing them.
const peekLease = 30 * time.Second

// deadLetterKeys are the attributes the listener adds when it dead-letters a message: a
// requeue or redrive drops them, keeping what the message came with.
var deadLetterKeys = []string{queue.AttrReason, queue.AttrOriginalID, queue.AttrOriginalQueue,
	queue.AttrDequeueCount, queue.AttrDeadLetteredAt, queue.AttrHandlerVersion, queue.AttrReleased}

// UserAttributes drops the dead-letter bookkeeping (deadLetterKeys), keeping what the
// message came with.
func UserAttributes(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		if !slices.Contains(deadLetterKeys, k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// RequeueOne moves the leased dead letter m back to dst with its original attributes. On
// Azure (no transactions) a message can be dead-lettered twice, by a listener whose lease
// ran out before its delete and by the one that got the redelivery: repeats of one original
// id (requeued records the ones moved) are only deleted.
func RequeueOne(ctx context.Context, dead, dst queue.Queue, qname string, m *queue.Message, requeued map[string]bool) error {
	if orig := m.Attributes[queue.AttrOriginalID]; orig != "" {
		if requeued[orig] {
			if err := dead.Delete(ctx, m); err != nil {
				return fmt.Errorf("requeue %s: delete repeated dead letter of %s: %w", m.ID, orig, err)
			}
			return nil
		}
		requeued[orig] = true
	}
	opts := queue.SendOptions{Attributes: UserAttributes(m.Attributes)}
	// A store with transactions (local) moves the dead letter back in one: a requeue
	// cut short can neither lose it nor leave it in both queues. A body left unread
	// (Oversize) moves inside the store.
	if mv, ok := queue.As[queue.Mover](dead); ok {
		err := mv.MoveTo(ctx, m, dst, m.Body, opts)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("requeue %s to %s: %w", m.ID, qname, err)
		}
	}
	if m.Oversize > 0 {
		return fmt.Errorf("requeue %s to %s: its body (%d bytes) was left in a store that cannot move it", m.ID, qname, m.Oversize)
	}
	if _, err := dst.Send(ctx, m.Body, opts); err != nil {
		return fmt.Errorf("requeue %s to %s: %w", m.ID, qname, err)
	}
	if err := dead.Delete(ctx, m); err != nil {
		return fmt.Errorf("requeue %s: delete from poison queue: %w", m.ID, err)
	}
	return nil
}

// PeekItem is one message as PeekQueue shows it: the body cut to a preview, its whole size.
type PeekItem struct {
	ID           string            `json:"id"`
	DequeueCount int               `json:"dequeue_count"` // receives so far
	EnqueuedAt   time.Time         `json:"enqueued_at"`
	VisibleAt    time.Time         `json:"visible_at,omitzero"` // zero when the backend does not say
	Size         int64             `json:"size"`
	Attributes   map[string]string `json:"attributes,omitempty"`
	Preview
	// Prefix is the body's first bytes as read (Preview shows them).
	Prefix []byte `json:"-"`
}

// PeekQueue calls fn for up to limit (0: all) messages of q, in receive order, after the
// cursor after ("" = the first), without consuming them, each with at most bodyBytes of its
// body, and returns the cursor that continues ("" when no more follow). On a store with a
// queue.Scanner only each body's prefix is read (the local store reads the rows one at a
// time, SQL substr, so a peek holds one prefix at once whatever the queue and its bodies;
// memory copies the page's prefixes); a store with only a queue.Peeker (Azure, NATS: no
// cursor, after must be "", and next is always "") copies its messages whole first.
func PeekQueue(ctx context.Context, q queue.Queue, after string, limit int, bodyBytes int64, fn func(PeekItem) error) (next string, err error) {
	bodyBytes = max(bodyBytes, 0)
	if s, ok := queue.As[queue.Scanner](q); ok {
		o := queue.ScanOptions{Filter: queue.Filter{Live: true}, After: after, Limit: limit, BodyBytes: bodyBytes}
		return s.Scan(ctx, o, func(m *queue.Message, size int64) error {
			return fn(peekItem(m, size))
		})
	}
	if after != "" {
		return "", fmt.Errorf("%w: the queue's backend has no cursor to continue a peek", ErrBadQuery)
	}
	p, ok := queue.As[queue.Peeker](q)
	if !ok {
		return "", fmt.Errorf("peek %s: the queue's backend cannot show messages without receiving them", q.Name())
	}
	ms, err := p.Peek(ctx, limit)
	if err != nil {
		return "", fmt.Errorf("peek %s: %w", q.Name(), err)
	}
	for i, m := range ms {
		c, size := cut(m, bodyBytes)
		ms[i] = nil // each whole body can go once shown
		if err := fn(peekItem(c, size)); err != nil {
			return "", err
		}
	}
	return "", nil
}

func peekItem(m *queue.Message, size int64) PeekItem {
	return PeekItem{ID: m.ID, DequeueCount: m.DequeueCount, EnqueuedAt: m.InsertedAt, VisibleAt: m.VisibleAt, Size: size,
		Attributes: m.Attributes, Preview: PreviewOf(m.Body, size), Prefix: m.Body}
}
