package nats

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wqhost/wqhost/listener/queue"
)

// hdrPrior is the deliveries a copy made by Release carries over from its original (the
// original's dequeue count less the delivery released): its dequeue count is its own
// NumDelivered plus these.
const hdrPrior = "Wqhost-Prior-Deliveries"

var _ queue.Releaser = (*Queue)(nil)

// Release implements queue.Releaser. JetStream's NumDelivered cannot be lowered (a Nak
// counts a delivery), so the message is published again to its subject, its headers kept
// and the deliveries that counted carried in hdrPrior, and the original acked once the copy
// is stored: the copy is received with the dequeue count the original had before this
// lease. The copy is a new stream message (a new id, at the end of the queue). Should the
// ack fail after the copy was stored, the original comes back once its lease runs out: a
// duplicate, never a loss. A message of an order group would lose its place in its group
// as a copy: it is Nak'ed, its release counted beside the queue (released.go).
func (q *Queue) Release(ctx context.Context, m *queue.Message) error {
	l, err := q.leaseOf(m, false)
	if err != nil {
		return err
	}
	if q.inGroup(l.msg.Subject) {
		return q.releaseInGroup(ctx, m, l)
	}
	src := l.msg
	cp := natsgo.NewMsg(src.Subject)
	cp.Data = src.Data
	for k, vs := range src.Header {
		// The server's headers (a Nats-Msg-Id would have the copy dropped as a duplicate)
		// and a past not-before, whose early-delivery correction would undercount the copy.
		if strings.HasPrefix(k, "Nats-") || k == hdrNotBefore || k == hdrPrior {
			continue
		}
		cp.Header[k] = vs
	}
	if prior := m.DequeueCount - 1; prior > 0 {
		cp.Header.Set(hdrPrior, strconv.Itoa(prior))
	}
	if _, err := q.b.js.PublishMsg(ctx, cp); err != nil {
		return fmt.Errorf("nats: release %s in %s: publish its copy: %w", m.ID, q.name, err)
	}
	q.mu.Lock()
	delete(q.leases, m.ID)
	q.mu.Unlock()
	q.noteWrite()
	if err := q.ackLease(ctx, l, ackAck); err != nil {
		return fmt.Errorf("nats: release %s in %s: ack the original after its copy was stored (it comes back when its lease ends: a duplicate): %w", m.ID, q.name, err)
	}
	m.LeaseToken = ""
	return nil
}

// priorDeliveries is the count a Release copy carries (hdrPrior), 0 for any other message.
func priorDeliveries(h natsgo.Header) int {
	n, err := strconv.Atoi(h.Get(hdrPrior))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
