package adminqueue

import (
	"context"
	"fmt"

	"github.com/wqhost/wqhost/listener/queue"
)

// TooLargeError refuses a message above its tenant's limits.max_message_bytes, or above what
// the queue's backend carries (Queue set: Azure's 64 KiB after encoding, NATS max_payload).
type TooLargeError struct {
	Index       int // which message of the request (0-based)
	Size, Limit int64
	Tenant      string
	Queue       string // set when Limit is the backend's (queue.MessageLimiter), not the tenant's
}

func (e *TooLargeError) Error() string {
	if e.Queue != "" {
		return fmt.Sprintf("message %d is %d bytes, above the %d bytes a message of queue %s carries on its backend: nothing sent",
			e.Index, e.Size, e.Limit, e.Queue)
	}
	return fmt.Sprintf("message %d is %d bytes, above tenants.%s.limits.max_message_bytes (%d bytes): the host would dead-letter it unread",
		e.Index, e.Size, e.Tenant, e.Limit)
}

// SendMessages sends bodies to q, in one transaction where the backend has batches (local),
// with opts (a delay, attributes), after checking every body against limit (tenant's
// limits.max_message_bytes) and against what the backend carries (queue.MessageLimiter):
// a *TooLargeError, nothing sent, rather than a send that stops halfway through the request
// with the messages before it sent and unreported. It returns the ids in order.
func SendMessages(ctx context.Context, q queue.Queue, tenant string, bodies [][]byte, opts queue.SendOptions, limit int64) ([]string, error) {
	var backendMax int64
	if l, ok := queue.As[queue.MessageLimiter](q); ok {
		backendMax = int64(l.MaxMessageBytes())
	}
	for i, b := range bodies {
		if int64(len(b)) > limit {
			return nil, &TooLargeError{Index: i, Size: int64(len(b)), Limit: limit, Tenant: tenant}
		}
		if backendMax > 0 && int64(len(b)) > backendMax {
			return nil, &TooLargeError{Index: i, Size: int64(len(b)), Limit: backendMax, Tenant: tenant, Queue: q.Name()}
		}
	}
	if bs, ok := q.(interface {
		SendBatch(ctx context.Context, bodies [][]byte, opts queue.SendOptions) ([]string, error)
	}); ok && len(bodies) > 1 {
		return bs.SendBatch(ctx, bodies, opts)
	}
	ids := make([]string, 0, len(bodies))
	for i, b := range bodies {
		id, err := q.Send(ctx, b, opts)
		if err != nil {
			return ids, fmt.Errorf("send message %d of %d to %s: %w", i, len(bodies), q.Name(), err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
