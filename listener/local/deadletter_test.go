package local_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/clock/clocktest"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// Dead-lettering on the local store is one transaction: the dead letter is inserted and the
// original deleted together, only while the lease is held. A copy whose lease expired (the
// CPU-starved host whose dead-letter write landed late) and a second move of the same lease
// both insert nothing, so a message is never dead-lettered twice.
func TestMoveToIsOneTransactionPerLease(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	b := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{Clock: clk})
	q, err := b.Queue(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	dl, err := b.Queue(ctx, "work"+queue.PoisonSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send(ctx, []byte("poison"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	ms, err := q.Receive(ctx, 1, 30*time.Second)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v %d", err, len(ms))
	}
	stale := *ms[0]
	clk.Advance(31 * time.Second) // the lease expires; another receiver takes the message
	again, err := q.Receive(ctx, 1, 30*time.Second)
	if err != nil || len(again) != 1 {
		t.Fatalf("redelivery: %v %d", err, len(again))
	}
	opts := queue.SendOptions{Attributes: map[string]string{queue.AttrOriginalID: stale.ID}}
	if err := q.MoveTo(ctx, &stale, dl, stale.Body, opts); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("move with an expired lease: %v, want ErrLeaseLost", err)
	}
	if d, _ := dl.Depth(ctx); d != 0 {
		t.Fatalf("%d dead letters after a move with an expired lease, want 0", d)
	}
	if err := q.MoveTo(ctx, again[0], dl, again[0].Body, opts); err != nil {
		t.Fatalf("move with the current lease: %v", err)
	}
	if err := q.MoveTo(ctx, again[0], dl, again[0].Body, opts); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("second move of one lease: %v, want ErrLeaseLost", err)
	}
	qd, _ := q.Depth(ctx)
	dd, _ := dl.Depth(ctx)
	if qd != 0 || dd != 1 {
		t.Fatalf("after the move: queue depth %d, dead letters %d; want 0 and 1", qd, dd)
	}
	got, err := dl.Receive(ctx, 1, time.Minute)
	if err != nil || len(got) != 1 || string(got[0].Body) != "poison" || got[0].Attributes[queue.AttrOriginalID] != stale.ID {
		t.Fatalf("dead letter: %v %+v", err, got)
	}
	other, err := local.Open(ctx, filepath.Join(t.TempDir(), "other.db"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	foreign, _ := other.Queue(ctx, "elsewhere")
	if err := q.MoveTo(ctx, got[0], foreign, nil, queue.SendOptions{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("move to another store: %v, want errors.ErrUnsupported", err)
	}
}
