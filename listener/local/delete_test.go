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

// TestDeleteBatchChecksEachLease: a batched delete takes one statement when its messages
// share their receive's lease token and another when they do not; either way each message
// is deleted only while the lease it carries is held, and the others get ErrLeaseLost.
func TestDeleteBatchChecksEachLease(t *testing.T) {
	for _, tt := range []struct {
		name string
		// pick chooses the batch to delete from two receives of two messages each (a1, a2
		// and b1, b2), after a2's lease was renewed (a2 carries the renewed token, stale
		// the old one) and the b leases ran out, b1's then taken by a third receive.
		pick func(a1, a2, stale, b1, b2 *queue.Message) []*queue.Message
		lost []bool
	}{
		{"one token", func(a1, _, stale, _, _ *queue.Message) []*queue.Message { return []*queue.Message{a1, stale} },
			[]bool{false, true}},
		{"one token, leases ran out", func(_, _, _, b1, b2 *queue.Message) []*queue.Message { return []*queue.Message{b1, b2} },
			[]bool{true, true}},
		{"two receives and a renewal", func(a1, a2, stale, b1, _ *queue.Message) []*queue.Message {
			return []*queue.Message{a2, stale, a1, b1}
		}, []bool{false, true, false, true}},
		{"one message twice", func(a1, _, _, _, _ *queue.Message) []*queue.Message { return []*queue.Message{a1, a1} },
			[]bool{false, true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			be := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{Clock: clk})
			q, _ := be.Queue(ctx, "q")
			for range 4 {
				if _, err := q.Send(ctx, []byte("m"), queue.SendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			a, err := q.Receive(ctx, 2, time.Hour)
			if err != nil || len(a) != 2 {
				t.Fatalf("first receive: %d messages, %v", len(a), err)
			}
			b, err := q.Receive(ctx, 2, time.Minute)
			if err != nil || len(b) != 2 {
				t.Fatalf("second receive: %d messages, %v", len(b), err)
			}
			stale := *a[1]
			if err := q.UpdateVisibility(ctx, a[1], time.Hour); err != nil {
				t.Fatal(err)
			}
			clk.Advance(2 * time.Minute)
			if again, err := q.Receive(ctx, 1, time.Hour); err != nil || len(again) != 1 || again[0].ID != b[0].ID {
				t.Fatalf("receive after the b leases ran out: %v, %v; want b1 (%s)", again, err, b[0].ID)
			}
			batch := tt.pick(a[0], a[1], &stale, b[0], b[1])
			errs := q.DeleteBatch(ctx, batch)
			deleted := map[string]bool{}
			for i, err := range errs {
				if lost := errors.Is(err, queue.ErrLeaseLost); lost != tt.lost[i] || (!lost && err != nil) {
					t.Errorf("message %d (%s): %v, want lease lost %v", i, batch[i].ID, err, tt.lost[i])
				}
				if err == nil {
					deleted[batch[i].ID] = true
				}
			}
			if d, err := q.Depth(ctx); err != nil || d != int64(4-len(deleted)) {
				t.Errorf("depth %d (%v) after deleting %d, want %d", d, err, len(deleted), 4-len(deleted))
			}
		})
	}
}
