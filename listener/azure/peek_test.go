package azure_test

import (
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestPeek: PeekMessages shows visible messages with their bodies decoded and attributes,
// honours max, and leaves them receivable.
func TestPeek(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64)
	q, err := b.Open(ctx, "peekq")
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"a", "b\x00c"} {
		if _, err := q.Send(ctx, []byte(body), queue.SendOptions{Attributes: map[string]string{"k": body}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		ms, err := q.(*azure.Queue).Peek(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 2 || string(ms[0].Body) != "a" || string(ms[1].Body) != "b\x00c" || ms[1].Attributes["k"] != "b\x00c" || ms[0].DequeueCount != 0 {
			t.Fatalf("peek: %+v", ms)
		}
	}
	if ms, err := q.(*azure.Queue).Peek(ctx, 1); err != nil || len(ms) != 1 {
		t.Fatalf("peek max 1: %d messages, err %v", len(ms), err)
	}
	receiveN(t, q, 2, time.Minute)
}
