package listener_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// drainN is the backlog every BenchmarkDrain iteration drains.
const drainN = 100_000

// BenchmarkDrain measures an end-to-end drain of 100k messages through the listener, with
// a no-op handler and the default configuration (16 workers max, batches of 32, batched
// deletes): on the memory backend, and on the local SQLite store with every commit fsynced.
//
//	go test -run '^$' -bench Drain ./listener/...
func BenchmarkDrain(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		benchDrain(b, func(b *testing.B) (listener.Queue, listener.Queue) {
			be := memory.New(memory.Options{})
			q, _ := be.Queue(context.Background(), "bench")
			dl, _ := be.Queue(context.Background(), "bench-poison")
			body := make([]byte, 100)
			for range drainN {
				if _, err := q.Send(context.Background(), body, listener.SendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			return q, dl
		})
	})
	b.Run("local", func(b *testing.B) {
		benchDrain(b, func(b *testing.B) (listener.Queue, listener.Queue) {
			ctx := context.Background()
			be, err := local.Open(ctx, filepath.Join(b.TempDir(), "q.db"), local.Options{Sync: local.SyncFull})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { be.Close() })
			q, _ := be.Queue(ctx, "bench")
			dl, _ := be.Queue(ctx, "bench-poison")
			body := make([]byte, 100)
			batch := make([][]byte, 1000)
			for i := range batch {
				batch[i] = body
			}
			for range drainN / len(batch) {
				if _, err := q.SendBatch(ctx, batch, listener.SendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			return q, dl
		})
	})
}

func benchDrain(b *testing.B, fill func(*testing.B) (q, dl listener.Queue)) {
	var elapsed time.Duration
	for range b.N {
		b.StopTimer()
		q, dl := fill(b)
		l, err := listener.New(listener.Config{
			Queue:      q,
			DeadLetter: dl,
			Handler:    listener.HandlerFunc(func(context.Context, *listener.Message) error { return nil }),
			Backoff:    builtin.NewBackoff(builtin.BackoffOptions{}),
			Scaler:     builtin.NewTarget(0),
			Poison:     builtin.NewPoison(builtin.PoisonOptions{}),
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		b.StartTimer()
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		for l.State().Processed < drainN {
			time.Sleep(200 * time.Microsecond)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		s := l.State()
		if s.Processed != drainN || s.Failed != 0 || s.LeasesLost != 0 {
			b.Fatalf("processed %d, failed %d, leases lost %d; want %d, 0, 0", s.Processed, s.Failed, s.LeasesLost, drainN)
		}
		b.Logf("peak workers %d, receives %d, p99 %s", s.PeakWorkers, s.Receives, s.LatencyP99)
	}
	b.ReportMetric(float64(drainN*b.N)/elapsed.Seconds(), "msg/s")
}
