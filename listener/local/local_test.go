package local_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/clock/clocktest"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/listener/queuetest"
)

func openStore(t testing.TB, path string, opts local.Options) *local.Backend {
	t.Helper()
	b, err := local.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// localSuite is the local store in a sync mode, on a fake clock; Reopen closes the store and
// opens its file again on the same clock.
func localSuite(name string, mode local.Sync) queuetest.Suite {
	var mu sync.Mutex
	type store struct {
		path string
		clk  *clocktest.Fake
	}
	stores := map[queue.Backend]store{}
	return queuetest.Suite{
		Name: name,
		New: func(t *testing.T) (queue.Backend, func(time.Duration)) {
			clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			path := filepath.Join(t.TempDir(), "q.db")
			b := openStore(t, path, local.Options{Sync: mode, Clock: clk})
			mu.Lock()
			stores[b] = store{path, clk}
			mu.Unlock()
			return b, clk.Advance
		},
		Reopen: func(t *testing.T, b queue.Backend) queue.Backend {
			mu.Lock()
			st := stores[b]
			mu.Unlock()
			if err := b.Close(); err != nil {
				t.Fatalf("close before reopening: %v", err)
			}
			return openStore(t, st.path, local.Options{Sync: mode, Clock: st.clk})
		},
	}
}

func TestConformance(t *testing.T) {
	t.Run("full", func(t *testing.T) { queuetest.Run(t, localSuite("local", local.SyncFull)) })
	t.Run("normal", func(t *testing.T) { queuetest.Run(t, localSuite("local(sync=normal)", local.SyncNormal)) })
}

func TestConformanceSharded(t *testing.T) {
	queuetest.Run(t, queuetest.Sharded(localSuite("local", local.SyncNormal), 2))
}

func TestReopenKeepsMessagesAndLeases(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	clk := clocktest.New(time.Unix(1_000_000, 0))
	b, err := local.Open(ctx, path, local.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := b.Open(ctx, "jobs")
	ids := map[string]bool{}
	for i := 0; i < 5; i++ {
		id, err := q.Send(ctx, []byte{byte(i)}, queue.SendOptions{Attributes: map[string]string{"n": string(rune('a' + i))}})
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
	}
	ms, err := q.Receive(ctx, 2, time.Minute)
	if err != nil || len(ms) != 2 {
		t.Fatalf("Receive: %d, %v", len(ms), err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := openStore(t, path, local.Options{Clock: clk})
	q2, _ := b2.Open(ctx, "jobs")
	if d, err := q2.Depth(ctx); err != nil || d != 5 {
		t.Fatalf("Depth after reopen = %d, %v; want 5", d, err)
	}
	got, err := q2.Receive(ctx, queue.MaxBatch, time.Minute)
	if err != nil || len(got) != 3 {
		t.Fatalf("Receive after reopen: %d, %v; want the 3 unleased", len(got), err)
	}
	// The lease taken before the restart still holds a token that works after it.
	if err := q2.Delete(ctx, ms[0]); err != nil {
		t.Fatalf("Delete with pre-restart lease: %v", err)
	}
	clk.Advance(2 * time.Minute)
	again, err := q2.Receive(ctx, queue.MaxBatch, time.Minute)
	if err != nil || len(again) != 4 {
		t.Fatalf("Receive after leases expired: %d, %v; want 4", len(again), err)
	}
	for _, m := range again {
		if !ids[m.ID] || m.Attributes["n"] == "" {
			t.Fatalf("unexpected message %s attrs %v", m.ID, m.Attributes)
		}
	}
}

func TestWaitWakesOnSendAndLeaseExpiry(t *testing.T) {
	ctx := context.Background()
	b := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{})
	q, _ := b.Queue(ctx, "w")
	done := make(chan error, 1)
	go func() { done <- q.Wait(ctx, 0) }()
	time.Sleep(20 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait on an empty queue returned: %v", err)
	default:
	}
	if _, err := q.Send(ctx, []byte("x"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Send did not wake the waiter")
	}
	if ms, err := q.Receive(ctx, 1, 50*time.Millisecond); err != nil || len(ms) != 1 {
		t.Fatalf("Receive: %d %v", len(ms), err)
	}
	start := time.Now()
	if err := q.Wait(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("Wait did not wake when the lease expired")
	}
	if ms, err := q.Receive(ctx, 1, time.Minute); err != nil || len(ms) != 1 {
		t.Fatalf("Receive after the lease expired: %d %v", len(ms), err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := q.Wait(cctx, 0); err != context.DeadlineExceeded {
		t.Fatalf("Wait with everything leased = %v, want DeadlineExceeded", err)
	}
}

func TestClosedBackend(t *testing.T) {
	ctx := context.Background()
	b, err := local.Open(ctx, filepath.Join(t.TempDir(), "q.db"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := b.Open(ctx, "x")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send(ctx, []byte("x"), queue.SendOptions{}); err == nil {
		t.Fatal("Send on a closed backend succeeded")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestConformanceShardedOne: over one shard, where the order of groups is defined, a sharded
// queue advertises exactly what the local store does (ordered receive included).
func TestConformanceShardedOne(t *testing.T) {
	queuetest.Run(t, queuetest.Sharded(localSuite("local", local.SyncNormal), 1))
}
