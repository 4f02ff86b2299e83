package adminqueue

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

// smallQueue is a queue whose backend carries at most max bytes a message (as Azure carries
// 48 KiB under base64), while its tenant's max_message_bytes is far larger.
type smallQueue struct {
	queue.Queue
	max int
}

func (q smallQueue) MaxMessageBytes() int { return q.max }

// TestSendMessagesRefusesAboveTheBackendLimit: a request one of whose bodies is above what
// the backend carries is refused whole, naming the message, its size, the backend's limit
// and the queue, before anything is sent; one within every limit is sent.
func TestSendMessagesRefusesAboveTheBackendLimit(t *testing.T) {
	ctx := context.Background()
	mq, err := memory.New(memory.Options{}).Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	q := smallQueue{Queue: mq, max: 10}
	bodies := [][]byte{[]byte("fits"), []byte("eleven byte")}
	ids, err := SendMessages(ctx, q, "acme", bodies, queue.SendOptions{}, 1<<20)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Index != 1 || tl.Size != 11 || tl.Limit != 10 || tl.Queue != "jobs" ||
		!strings.Contains(err.Error(), "message 1 is 11 bytes, above the 10 bytes a message of queue jobs carries") {
		t.Fatalf("SendMessages = %v, %v; want a *TooLargeError for message 1 (11 bytes, backend limit 10, queue jobs)", ids, err)
	}
	if n, err := mq.Depth(ctx); err != nil || n != 0 {
		t.Fatalf("depth after a refused request = %d, %v; want 0: nothing of it sent", n, err)
	}
	if ids, err := SendMessages(ctx, q, "acme", bodies[:1], queue.SendOptions{}, 1<<20); err != nil || len(ids) != 1 {
		t.Fatalf("SendMessages of a body within every limit = %v, %v", ids, err)
	}
}
