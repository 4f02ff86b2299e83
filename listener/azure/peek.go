package azure

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/wqhost/wqhost/listener/queue"
)

// Peek returns up to max visible messages (Azure's PeekMessages: at most 32, leased and
// delayed messages are not seen) without leasing or changing them. A body that does not
// decode is returned as its raw text with the decoding error as the reason attribute.
// max <= 0 means 32.
func (q *Queue) Peek(ctx context.Context, max int) ([]*queue.Message, error) {
	if max <= 0 || max > queue.MaxBatch {
		max = queue.MaxBatch
	}
	n := int32(max)
	var resp azqueue.PeekMessagesResponse
	err := q.call(ctx, opReceive, "peek", "", func(ctx context.Context) (err error) {
		resp, err = q.client.PeekMessages(ctx, &azqueue.PeekMessagesOptions{NumberOfMessages: &n})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]*queue.Message, 0, len(resp.Messages))
	for _, pm := range resp.Messages {
		m := &queue.Message{ID: deref(pm.MessageID), Queue: q.name, DequeueCount: int(derefInt(pm.DequeueCount))}
		if pm.InsertionTime != nil {
			m.InsertedAt = *pm.InsertionTime
		}
		body, attrs, derr := decode(q.b.enc, deref(pm.MessageText))
		if derr != nil {
			body, attrs = []byte(deref(pm.MessageText)), map[string]string{queue.AttrReason: derr.Error()}
		}
		if body == nil {
			body = []byte{}
		}
		m.Body, m.Attributes = body, attrs
		m.DequeueCount -= min(releasesOf(m), m.DequeueCount)
		out = append(out, m)
	}
	return out, nil
}
