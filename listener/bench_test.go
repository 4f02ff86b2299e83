package listener_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
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
		benchDrain(b, func(b *testing.B) (queue.Queue, queue.Queue) {
			be := memory.New(memory.Options{})
			q, _ := be.Queue(context.Background(), "bench")
			dl, _ := be.Queue(context.Background(), "bench-poison")
			body := make([]byte, 100)
			for range drainN {
				if _, err := q.Send(context.Background(), body, queue.SendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			return q, dl
		})
	})
	b.Run("local", func(b *testing.B) {
		benchDrain(b, func(b *testing.B) (queue.Queue, queue.Queue) {
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
				if _, err := q.SendBatch(ctx, batch, queue.SendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			return q, dl
		})
	})
}

func benchDrain(b *testing.B, fill func(*testing.B) (q, dl queue.Queue)) {
	var elapsed time.Duration
	for range b.N {
		b.StopTimer()
		q, dl := fill(b)
		l, err := listener.New(listener.Config{
			Queue:      q,
			DeadLetter: dl,
			Handler:    listener.HandlerFunc(func(context.Context, *queue.Message) error { return nil }),
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

// BenchmarkSlowMessages feeds a listener a steady trickle (one message every 2 ms) of which
// one in eight takes 40 ms and the rest 1 ms, with 4 handler slots: enough for the load
// (5.9 ms of work per message on average, 4 at a time) only if a slow message does not
// hold up the messages around it. It reports the throughput as a fraction of the arrival
// rate (1 = keeping up) and the p50 and p99 time from send to handled.
//
//	go test -run '^$' -bench SlowMessages ./listener/
func BenchmarkSlowMessages(b *testing.B) {
	const n, every = 500, 2 * time.Millisecond
	var keptUp, p50, p99 float64
	for range b.N {
		be := memory.New(memory.Options{})
		q, _ := be.Queue(context.Background(), "slow")
		dl, _ := be.Queue(context.Background(), "slow-poison")
		var mu sync.Mutex
		sentAt := make(map[string]time.Time, n)
		lat := make([]time.Duration, 0, n)
		l, err := listener.New(listener.Config{
			Queue: q, DeadLetter: dl, HandlerSlots: 4,
			Handler: listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
				d := time.Millisecond
				if m.Body[0] == 's' {
					d = 40 * time.Millisecond
				}
				time.Sleep(d)
				mu.Lock()
				lat = append(lat, time.Since(sentAt[m.ID]))
				mu.Unlock()
				return nil
			}),
			Backoff: builtin.NewBackoff(builtin.BackoffOptions{}),
			Scaler:  builtin.NewTarget(0),
			Poison:  builtin.NewPoison(builtin.PoisonOptions{}),
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		start := time.Now()
		next := start
		for i := range n {
			body := []byte("f")
			if i%8 == 0 {
				body = []byte("s")
			}
			mu.Lock()
			id, err := q.Send(ctx, body, queue.SendOptions{})
			sentAt[id] = time.Now()
			mu.Unlock()
			if err != nil {
				b.Fatal(err)
			}
			l.Notify()
			next = next.Add(every)
			time.Sleep(time.Until(next))
		}
		for deadline := time.Now().Add(time.Minute); l.State().Processed < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d processed after a minute", l.State().Processed, n)
			}
		}
		elapsed := time.Since(start)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		slices.Sort(lat)
		keptUp += (float64(n) / elapsed.Seconds()) / (float64(time.Second) / float64(every))
		p50 += float64(lat[len(lat)/2]) / float64(time.Millisecond)
		p99 += float64(lat[len(lat)*99/100]) / float64(time.Millisecond)
	}
	b.ReportMetric(keptUp/float64(b.N), "of-arrival-rate")
	b.ReportMetric(p50/float64(b.N), "p50-ms")
	b.ReportMetric(p99/float64(b.N), "p99-ms")
}
