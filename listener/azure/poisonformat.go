package azure

import (
	"fmt"

	"github.com/wqhost/wqhost/listener/queue"
)

// PoisonFormat is how a dead letter is stored in a <queue>-poison queue.
type PoisonFormat string

const (
	// PoisonEnvelope (the default) stores a dead letter as wqhost's JSON envelope (see
	// envelope.go): the original body with the reason, dequeue count, original id and queue
	// and dead-letter time, so poison list shows why and poison requeue treats repeats of one
	// original as one.
	PoisonEnvelope PoisonFormat = "envelope"
	// PoisonRaw stores the original body alone, encoded like any message, as Azure
	// Functions' <queue>-poison holds it: a Functions-style consumer reads the body it
	// expects. The dead-letter attributes are not in the message: the backend logs them, one
	// warning per dead letter ("azure: dead letter stored as its raw body", with the queue,
	// original id, dequeue count and reason), and poison list shows no reason, dequeue count
	// or original id (repeats of one original on Azure are separate entries). A body that
	// EncodingText cannot carry (binary) still goes in an envelope.
	PoisonRaw PoisonFormat = "raw"
)

// checkPoisonFormat validates Options.PoisonFormat.
func checkPoisonFormat(f PoisonFormat) error {
	switch f {
	case "", PoisonEnvelope, PoisonRaw:
		return nil
	}
	return fmt.Errorf("azure: Options.PoisonFormat %q: want %q or %q", f, PoisonEnvelope, PoisonRaw)
}

// encodeSend is the message text Send stores for body and attrs on this queue: the
// envelope when there are attributes, except on a poison queue of a PoisonRaw backend,
// where the body goes alone and the attributes to the log.
func (q *Queue) encodeSend(body []byte, attrs map[string]string) (string, error) {
	if !q.poison || q.b.pfmt != PoisonRaw || len(attrs) == 0 {
		return encode(q.b.enc, body, attrs)
	}
	text, err := encode(q.b.enc, body, nil)
	if err != nil {
		// EncodingText and a binary body: only the envelope (base64 inside) carries it.
		return encode(q.b.enc, body, attrs)
	}
	q.b.log.Warn("azure: dead letter stored as its raw body (poison_format raw): its reason and dequeue count are in this line only",
		"poison_queue", q.name, "original_id", attrs[queue.AttrOriginalID], "original_queue", attrs[queue.AttrOriginalQueue],
		"dequeue_count", attrs[queue.AttrDequeueCount], "reason", attrs[queue.AttrReason], "dead_lettered_at", attrs[queue.AttrDeadLetteredAt], "handler_version", attrs[queue.AttrHandlerVersion])
	return text, nil
}
