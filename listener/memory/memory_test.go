package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/clock/clocktest"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/listener/queuetest"
)

// memorySuite is the memory backend on a fake clock (real: the system clock).
func memorySuite(real bool) queuetest.Suite {
	name := "memory"
	if real {
		name = "memory(real clock)"
	}
	return queuetest.Suite{Name: name, New: func(t *testing.T) (queue.Backend, func(time.Duration)) {
		if real {
			b := memory.New(memory.Options{})
			t.Cleanup(func() { b.Close() })
			return b, nil
		}
		clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		b := memory.New(memory.Options{Clock: clk})
		t.Cleanup(func() { b.Close() })
		return b, clk.Advance
	}}
}

func TestConformance(t *testing.T) { queuetest.Run(t, memorySuite(false)) }

func TestConformanceRealClock(t *testing.T) { queuetest.Run(t, memorySuite(true)) }

func TestConformanceSharded(t *testing.T) { queuetest.Run(t, queuetest.Sharded(memorySuite(false), 2)) }

func TestWaitWakesOnSend(t *testing.T) {
	b := memory.New(memory.Options{})
	q, err := b.Queue(context.Background(), "w")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q.Wait(context.Background(), 0) }()
	time.Sleep(10 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait on empty queue returned early: %v", err)
	default:
	}
	if _, err := q.Send(context.Background(), []byte("x"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Send did not wake the waiter")
	}
}

func TestWaitWakesWhenLeaseExpires(t *testing.T) {
	ctx := context.Background()
	b := memory.New(memory.Options{})
	q, _ := b.Queue(ctx, "w")
	if _, err := q.Send(ctx, []byte("x"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	if ms, err := q.Receive(ctx, 1, 30*time.Millisecond); err != nil || len(ms) != 1 {
		t.Fatalf("Receive: %v %v", ms, err)
	}
	start := time.Now()
	if err := q.Wait(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("Wait did not wake when the lease expired")
	}
	if ms, err := q.Receive(ctx, 1, time.Minute); err != nil || len(ms) != 1 {
		t.Fatalf("after Wait, Receive = %v %v; want the expired message", ms, err)
	}
}

func TestWaitInjectedClock(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New(time.Unix(1000, 0))
	b := memory.New(memory.Options{Clock: clk})
	q, _ := b.Queue(ctx, "w")
	if _, err := q.Send(ctx, []byte("x"), queue.SendOptions{Delay: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := q.Wait(ctx, 20*time.Millisecond); err != nil {
		t.Fatalf("Wait with limit: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- q.Wait(ctx, 0) }()
	time.Sleep(10 * time.Millisecond)
	clk.Advance(time.Minute)
	b.Notify()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Notify did not wake the waiter")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	// A visible message makes Wait return at once, even with a cancelled context.
	if err := q.Wait(cctx, 0); err != nil {
		t.Fatalf("Wait with a visible message: %v", err)
	}
}

func TestWaitContextCancelled(t *testing.T) {
	b := memory.New(memory.Options{})
	q, _ := b.Queue(context.Background(), "w")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.Wait(ctx, 0); err != context.DeadlineExceeded {
		t.Fatalf("Wait = %v, want DeadlineExceeded", err)
	}
}

// BenchmarkStoreDrain measures the raw store (no listener; BenchmarkDrain in package
// listener is the end-to-end figure).
func BenchmarkStoreDrain(b *testing.B) {
	ctx := context.Background()
	body := make([]byte, 100)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		be := memory.New(memory.Options{})
		q, _ := be.Queue(ctx, "bench")
		const n = 100_000
		for j := 0; j < n; j++ {
			q.Send(ctx, body, queue.SendOptions{})
		}
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					ms, _ := q.Receive(ctx, queue.MaxBatch, time.Minute)
					if len(ms) == 0 {
						return
					}
					q.DeleteBatch(ctx, ms)
				}
			}()
		}
		wg.Wait()
		b.ReportMetric(n/time.Since(start).Seconds(), "msg/s")
	}
}
