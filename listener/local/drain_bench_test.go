package local_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// fill enqueues n 100-byte messages in batches of 1000.
func fill(tb testing.TB, q *local.Queue, n int) {
	tb.Helper()
	body := make([]byte, 100)
	batch := make([][]byte, 0, 1000)
	for i := 0; i < n; i++ {
		batch = append(batch, body)
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := q.SendBatch(context.Background(), batch, queue.SendOptions{}); err != nil {
				tb.Fatalf("fill: %v", err)
			}
			batch = batch[:0]
		}
	}
}

// drain empties q with workers goroutines, each receiving 32 and deleting them in one batch,
// and returns the number of messages deleted.
func drain(tb testing.TB, q *local.Queue, workers int) int {
	tb.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ms, err := q.Receive(ctx, queue.MaxBatch, time.Minute)
				if err != nil {
					tb.Errorf("Receive: %v", err)
					return
				}
				if len(ms) == 0 {
					return
				}
				for i, err := range q.DeleteBatch(ctx, ms) {
					if err != nil {
						tb.Errorf("Delete %s: %v", ms[i].ID, err)
						return
					}
				}
				mu.Lock()
				total += len(ms)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return total
}

// BenchmarkStoreDrain measures the raw store (no listener; BenchmarkDrain in package listener is
// the end-to-end figure): a drain of 100k messages, receive(32) plus one batched
// delete, from 4 goroutines, every commit fsynced (SyncFull, the default) or not (SyncNormal).
//
//	go test ./listener/local -run '^$' -bench BenchmarkStoreDrain -benchtime 1x -count 3
func BenchmarkStoreDrain(b *testing.B) {
	n := 100_000
	if testing.Short() {
		n = 10_000 // CI's smoke run of every benchmark
	}
	for _, c := range []struct {
		name string
		opts local.Options
	}{
		{"local", local.Options{Sync: local.SyncFull}},
		{"local-normal", local.Options{Sync: local.SyncNormal}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				be := openStore(b, filepath.Join(b.TempDir(), "q.db"), c.opts)
				q, err := be.Queue(context.Background(), "bench")
				if err != nil {
					b.Fatal(err)
				}
				fill(b, q, n)
				b.StartTimer()
				start := time.Now()
				if got := drain(b, q, 4); got != n {
					b.Fatalf("drained %d messages, want %d", got, n)
				}
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "msg/s")
		})
	}
}
