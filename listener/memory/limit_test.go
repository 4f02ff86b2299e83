package memory_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"

	"github.com/wqhost/wqhost/listener/memory"
)

// TestMaxMessageBytes: the memory backend has no limit of its own below what a guest can
// address, and carries a body larger than any other backend's limit.
func TestMaxMessageBytes(t *testing.T) {
	ctx := context.Background()
	q, err := memory.New(memory.Options{}).Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if got := q.MaxMessageBytes(); got < 1<<31-1 {
		t.Fatalf("MaxMessageBytes %d, want at least MaxInt32", got)
	}
	body := bytes.Repeat([]byte{'m'}, 1<<20)
	if _, err := q.Send(ctx, body, queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	ms, err := q.Receive(ctx, 1, time.Minute)
	if err != nil || len(ms) != 1 || !bytes.Equal(ms[0].Body, body) {
		t.Fatalf("Receive: %d messages, %v", len(ms), err)
	}
}
