package local_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/clock/clocktest"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// TestOrderedReceiveGate walks the gate through a group's life: the lowest group (and
// unkeyed messages) first, nothing of a higher group while a lower one is leased or waiting
// for its retry, the next group once the last message of the lower one is deleted.
func TestOrderedReceiveGate(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	be := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{Sync: local.SyncNormal, Clock: clk})
	q, err := be.Queue(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	other, err := be.Queue(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	send := func(q *local.Queue, body, group string) {
		t.Helper()
		var attrs map[string]string
		if group != "" {
			attrs = map[string]string{queue.AttrOrderKey: group}
		}
		if _, err := q.Send(ctx, []byte(body), queue.SendOptions{Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	// Sent out of group order; group 10 sorts after 2 (integers, not strings).
	send(q, "g10", "10")
	send(q, "g2a", "2")
	send(q, "g1a", "1")
	send(other, "other-g0", "0") // another queue's groups do not gate this one
	send(q, "free", "")
	send(q, "g1b", "1")
	send(q, "g2b", "2")

	receive := func(wantHeld bool, want ...string) []*queue.Message {
		t.Helper()
		ms, heldUntil, err := q.ReceiveOrdered(ctx, 32, time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		held := !heldUntil.IsZero()
		var got []string
		for _, m := range ms {
			got = append(got, string(m.Body))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) || held != wantHeld {
			t.Fatalf("received %v held=%v; want %v held=%v", got, held, want, wantHeld)
		}
		return ms
	}
	g1 := receive(false, "g1a", "g1b", "free")
	receive(true) // group 1 is leased: group 2 is held back
	if err := q.Delete(ctx, g1[0]); err != nil {
		t.Fatal(err)
	}
	retry := g1[1]
	if string(retry.Body) == "free" {
		retry = g1[2]
	}
	// A retry of group 1, due in 10s: group 2 still waits for it.
	if err := q.UpdateVisibility(ctx, retry, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, until, _ := q.ReceiveOrdered(ctx, 32, time.Minute, 0); !until.Equal(clk.Now().Add(10 * time.Second)) {
		t.Fatalf("held until %s; want the retry's due time %s", until, clk.Now().Add(10*time.Second))
	}
	clk.Advance(11 * time.Second)
	again := receive(false, string(retry.Body))
	if again[0].DequeueCount != 2 {
		t.Fatalf("dequeue count %d after one retry; want 2", again[0].DequeueCount)
	}
	if err := q.Delete(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	g2 := receive(false, "g2a", "g2b")
	for _, m := range g2 {
		if err := q.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	receive(false, "g10")
	receive(false)
}

// groupBatches records the order keys of each batch call.
type groupBatches struct {
	mu    sync.Mutex
	calls [][]string
}

func (h *groupBatches) Handle(context.Context, *queue.Message) outcome.Outcome {
	return outcome.Outcome{}
}

func (h *groupBatches) HandleBatch(_ context.Context, ms []*queue.Message, vs []outcome.Outcome) {
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.Attributes[queue.AttrOrderKey])
	}
	h.mu.Lock()
	h.calls = append(h.calls, keys)
	h.mu.Unlock()
	for i := range vs {
		vs[i] = outcome.Outcome{}
	}
}

// A batch never mixes ordered groups: a batching listener on an ordered queue hands group N
// (with unkeyed messages) in one call and group N+1 in a later one, and does not wait out
// max_wait for messages its own batch holds back.
func TestOrderedBatchesNeverMixGroups(t *testing.T) {
	ctx := context.Background()
	be := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{Sync: local.SyncNormal})
	q, _ := be.Queue(ctx, "work")
	dl, _ := be.Queue(ctx, "work"+queue.PoisonSuffix)
	for _, g := range []string{"1", "2", "1", "", "3", "2", "1"} {
		var attrs map[string]string
		if g != "" {
			attrs = map[string]string{queue.AttrOrderKey: g}
		}
		if _, err := q.Send(ctx, []byte("m"+g), queue.SendOptions{Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	h := &groupBatches{}
	l, err := listener.New(listener.Config{
		Queue: q, Ordered: true, DeadLetter: dl, Handler: h,
		Batch:   listener.BatchConfig{MaxMessages: 100, MaxWait: time.Hour},
		Backoff: builtin.NewBackoff(builtin.BackoffOptions{}), Scaler: builtin.NewTarget(0),
		Poison: builtin.NewPoison(builtin.PoisonOptions{}), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(rctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(time.Minute)
	for l.State().Processed < 7 {
		if time.Now().After(deadline) {
			t.Fatalf("processed %d of 7 after a minute (max_wait is an hour: a wait for held groups?)", l.State().Processed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var groups []string
	for _, keys := range h.calls {
		g := ""
		for _, k := range keys {
			if k == "" {
				continue
			}
			if g != "" && k != g {
				t.Errorf("a call mixed groups %s and %s: %v", g, k, keys)
			}
			g = k
		}
		groups = append(groups, g)
	}
	if want := []string{"1", "2", "3"}; !slices.Equal(groups, want) {
		t.Errorf("calls by group %v (%v), want %v", groups, h.calls, want)
	}
}
