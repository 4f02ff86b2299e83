package local_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/diskprobe"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// BenchmarkListenerDrainCeiling drains a preloaded backlog through the listener with its
// default configuration and a no-op handler, on the local store with every commit fsynced
// (SyncFull), for 100-byte and 1 KiB bodies, and sets the rate against what the disk would
// allow: an fsync probe on the same directory, run just before and just after the drain,
// gives fsync/s (the median of its bursts); the disk's ceiling at the batching the drain
// achieved is fsync/s ÷ commits/msg, and ceiling-ratio = msg/s ÷ that ceiling (= the
// drain's commits/s ÷ fsync/s, about the share of the store's writer time spent waiting
// for fsync). A ratio near 1 means the store waits on the disk; far below, on the CPU.
//
//	go test ./listener/local -run '^$' -bench ListenerDrainCeiling -benchtime 1x -count 3
func BenchmarkListenerDrainCeiling(b *testing.B) {
	n := 50_000
	if testing.Short() {
		n = 5_000 // CI's smoke run of every benchmark
	}
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) {
			var msgs, commits int64
			var elapsed time.Duration
			var rates []float64 // fsync/s of each probe burst
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				path := filepath.Join(dir, "q.db")
				counter := diskprobe.Commits(path)
				be := openStore(b, path, local.Options{Sync: local.SyncFull})
				q, _ := be.Queue(context.Background(), "drain")
				dl, _ := be.Queue(context.Background(), "drain"+queue.PoisonSuffix)
				fillBodies(b, q, n, size)
				rates = append(rates, fsyncProbe(b, dir)...)
				b.StartTimer()
				c0 := counter.Load()
				elapsed += drainListener(b, q, dl, n)
				commits += counter.Load() - c0
				b.StopTimer()
				rates = append(rates, fsyncProbe(b, dir)...)
				msgs += int64(n)
			}
			rate := float64(msgs) / elapsed.Seconds()
			perMsg := float64(commits) / float64(msgs)
			slices.Sort(rates)
			fsyncRate := rates[len(rates)/2]
			ceiling := fsyncRate / perMsg
			b.ReportMetric(rate, "msg/s")
			b.ReportMetric(perMsg, "commits/msg")
			b.ReportMetric(fsyncRate, "fsync/s")
			b.ReportMetric(ceiling, "ceiling-msg/s")
			b.ReportMetric(rate/ceiling, "ceiling-ratio")
		})
	}
}

// fillBodies enqueues n messages of size bytes in batches of 1000.
func fillBodies(tb testing.TB, q *local.Queue, n, size int) {
	tb.Helper()
	body := []byte(strings.Repeat("x", size))
	batch := make([][]byte, 0, 1000)
	for i := range n {
		batch = append(batch, body)
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := q.SendBatch(context.Background(), batch, queue.SendOptions{}); err != nil {
				tb.Fatalf("fill: %v", err)
			}
			batch = batch[:0]
		}
	}
}

// drainListener runs a listener with the default configuration and a no-op handler on q
// until n messages are processed, and returns how long that took. A failed message or a
// lost lease fails the benchmark.
func drainListener(tb testing.TB, q, dl queue.Queue, n int) time.Duration {
	tb.Helper()
	l, err := listener.New(listener.Config{
		Queue: q, DeadLetter: dl,
		Handler: listener.HandlerFunc(func(context.Context, *queue.Message) error { return nil }),
		Backoff: builtin.NewBackoff(builtin.BackoffOptions{}),
		Scaler:  builtin.NewTarget(0),
		Poison:  builtin.NewPoison(builtin.PoisonOptions{}),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- l.Run(ctx) }()
	deadline := start.Add(5 * time.Minute)
	for l.State().Processed < uint64(n) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			tb.Fatalf("processed %d of %d in 5 minutes", l.State().Processed, n)
		}
		time.Sleep(200 * time.Microsecond)
	}
	elapsed := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	if s := l.State(); s.Failed != 0 || s.LeasesLost != 0 {
		tb.Fatalf("failed %d, leases lost %d; want 0, 0", s.Failed, s.LeasesLost)
	}
	return elapsed
}

// fsyncProbe is the disk's fsync rate in dir (diskprobe), as the rates of 10 bursts: the
// benchmark takes the median of those before and after the drain.
func fsyncProbe(tb testing.TB, dir string) []float64 {
	tb.Helper()
	p, err := diskprobe.ProbeFsync(dir, 250*time.Millisecond)
	if err != nil {
		tb.Fatal(err)
	}
	return p.Bursts
}
