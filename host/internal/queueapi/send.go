package queueapi

import (
	"context"
	"fmt"

	"github.com/wqhost/wqhost/listener/queue"
)

// TooLargeError refuses a message above its tenant's limits.max_message_bytes.
type TooLargeError struct {
	Index       int // which message of the request (0-based)
	Size, Limit int64
	Tenant      string
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("message %d is %d bytes, above tenants.%s.limits.max_message_bytes (%d bytes): the host would dead-letter it unread",
		e.Index, e.Size, e.Tenant, e.Limit)
}

// SendMessages sends bodies to q, in one transaction where the backend has batches (local),
// with opts (a delay, attributes), after checking every body against limit (tenant's
// limits.max_message_bytes: a *TooLargeError, nothing sent). It returns the ids in order.
func SendMessages(ctx context.Context, q queue.Queue, tenant string, bodies [][]byte, opts queue.SendOptions, limit int64) ([]string, error) {
	for i, b := range bodies {
		if int64(len(b)) > limit {
			return nil, &TooLargeError{Index: i, Size: int64(len(b)), Limit: limit, Tenant: tenant}
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
