package local_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/wqhost/wqhost/listener/queue"

	"github.com/wqhost/wqhost/listener/local"
)

// TestMaxMessageBytesIsTheStoreLimit: MaxMessageBytes is the store's body limit (64 MiB by
// default), and Send takes a body of exactly that size and refuses one byte more.
func TestMaxMessageBytesIsTheStoreLimit(t *testing.T) {
	ctx := context.Background()
	def := openStore(t, filepath.Join(t.TempDir(), "def.db"), local.Options{})
	dq, err := def.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if got := dq.MaxMessageBytes(); got != local.DefaultMaxBodyBytes {
		t.Errorf("default store: MaxMessageBytes %d, want %d", got, local.DefaultMaxBodyBytes)
	}
	b := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{MaxBodyBytes: 5000})
	q, err := b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	n := q.MaxMessageBytes()
	if n != 5000 {
		t.Fatalf("MaxMessageBytes %d, want the store's 5000", n)
	}
	if _, err := q.Send(ctx, bytes.Repeat([]byte{'x'}, n), queue.SendOptions{}); err != nil {
		t.Errorf("Send of MaxMessageBytes: %v", err)
	}
	if _, err := q.Send(ctx, bytes.Repeat([]byte{'x'}, n+1), queue.SendOptions{}); !errors.Is(err, local.ErrTooLarge) {
		t.Errorf("Send of MaxMessageBytes+1: %v, want ErrTooLarge", err)
	}
}
