package local_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
)

// TestOrderedReceiveGate walks the gate through a group's life: the lowest group (and
// unkeyed messages) first, nothing of a higher group while a lower one is leased or waiting
// for its retry, the next group once the last message of the lower one is deleted.
func TestOrderedReceiveGate(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	be := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{Sync: local.SyncNormal, Now: clk.Now})
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
			attrs = map[string]string{listener.AttrOrderKey: group}
		}
		if _, err := q.Send(ctx, []byte(body), listener.SendOptions{Attributes: attrs}); err != nil {
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

	receive := func(wantHeld bool, want ...string) []*listener.Message {
		t.Helper()
		ms, heldUntil, err := q.ReceiveOrdered(ctx, 32, time.Minute)
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
	if _, until, _ := q.ReceiveOrdered(ctx, 32, time.Minute); !until.Equal(clk.Now().Add(10 * time.Second)) {
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
