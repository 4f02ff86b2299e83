// Package queueops are the operations on a tenant's queues that run beside a host, or
// without one, through the config alone (the CLI's peek and poison commands): peek at a
// queue, and list, requeue or purge its dead letters. Each opens the queues it needs on a
// backend of its own (backends.OpenQueues) and closes it on return; nothing is shared and
// nothing is locked.
package queueops

import (
	"context"
	"fmt"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/internal/backends"
	"github.com/wqhost/wqhost/listener/queue"
)

// PeekedMessage is one message as PeekMessages shows it.
type PeekedMessage struct {
	ID           string            `json:"id"`
	Body         []byte            `json:"-"`
	DequeueCount int               `json:"dequeue_count"` // receives so far
	InsertedAt   time.Time         `json:"inserted_at"`
	VisibleAt    time.Time         `json:"visible_at,omitzero"` // zero when the backend does not say
	Attributes   map[string]string `json:"attributes,omitempty"`
}

// PeekMessages returns up to limit (0: the backend's maximum, all for the local and memory
// backends) messages of tenant's queue — an input, output or <queue>-poison queue — without
// consuming them, in receive order. It opens the queue through cfg as the host would, so it
// may run beside a running host.
func PeekMessages(ctx context.Context, cfg *config.Config, tenant, qname string, limit int) ([]PeekedMessage, error) {
	qs, closer, err := backends.OpenQueues(ctx, cfg, tenant, qname)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	p, ok := queue.As[queue.Peeker](qs[0])
	if !ok {
		return nil, fmt.Errorf("peek %s/%s: the queue's backend cannot show messages without receiving them", tenant, qname)
	}
	ms, err := p.Peek(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("peek %s/%s: %w", tenant, qname, err)
	}
	out := make([]PeekedMessage, len(ms))
	for i, m := range ms {
		out[i] = PeekedMessage{ID: m.ID, Body: m.Body, DequeueCount: m.DequeueCount, InsertedAt: m.InsertedAt,
			VisibleAt: m.VisibleAt, Attributes: m.Attributes}
	}
	return out, nil
}
