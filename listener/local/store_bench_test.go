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

// BenchmarkStore compares the SQLite tunings the local backend can run with, on 20k 100-byte
// messages: sends of one message from 8 goroutines, then a 4-goroutine drain. "nogroup" turns
// group commit off (one transaction per call), which is what the writer goroutine buys back.
// bbolt and pebble were measured in /work/shared/design/local-store-measurements.md and were
// not better at equal durability, so they are not re-measured here.
//
//	go test ./listener/local -run '^$' -bench BenchmarkStore -benchtime 1x -count 3
func BenchmarkStore(b *testing.B) {
	n := 20_000
	if testing.Short() {
		n = 2_000 // CI's smoke run of every benchmark
	}
	for _, c := range []struct {
		name string
		opts local.Options
	}{
		{"full-group", local.Options{Sync: local.SyncFull}},
		{"full-nogroup", local.Options{Sync: local.SyncFull, MaxGroup: 1}},
		{"normal-group", local.Options{Sync: local.SyncNormal}},
		{"normal-nogroup", local.Options{Sync: local.SyncNormal, MaxGroup: 1}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var sendT, drainT time.Duration
			for i := 0; i < b.N; i++ {
				be := openStore(b, filepath.Join(b.TempDir(), "q.db"), c.opts)
				q, err := be.Queue(context.Background(), "bench")
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				sendConcurrently(b, q, n, 8)
				sendT += time.Since(start)
				start = time.Now()
				if got := drain(b, q, 4); got != n {
					b.Fatalf("drained %d, want %d", got, n)
				}
				drainT += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/sendT.Seconds(), "send-msg/s")
			b.ReportMetric(float64(n*b.N)/drainT.Seconds(), "drain-msg/s")
		})
	}
}

func sendConcurrently(tb testing.TB, q *local.Queue, n, workers int) {
	tb.Helper()
	body := make([]byte, 100)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				if _, err := q.Send(context.Background(), body, queue.SendOptions{}); err != nil {
					tb.Errorf("Send: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
