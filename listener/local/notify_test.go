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

// TestWatchExternalWakesWaiter: two Backends on one file stand for `wqhost run` and a
// `wqhost send` in another process (separate connections and writers; the file watch sees
// the other's WAL writes exactly as across processes). A Wait with a one-minute limit must
// return promptly after the other Backend's Send when the watch is on, and must still be
// blocked without it (the control that shows the test can fail).
func TestWatchExternalWakesWaiter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool
		queue string // queue the other process sends to
		wake  bool
	}{
		{"watched", true, "jobs", true},
		{"unwatched", false, "jobs", false},
		{"other queue stays asleep", true, "other", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "q.db")
			host := openStore(t, path, local.Options{})
			sender := openStore(t, path, local.Options{})
			q, _ := host.Queue(ctx, "jobs")
			// Something already in the store, so the watcher's starting point is not zero;
			// leased for an hour, so Wait has nothing visible to return for. Done before the
			// watch starts: the watcher would rightly wake "jobs" for this new row.
			if _, err := q.Send(ctx, []byte("old"), queue.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			if ms, err := q.Receive(ctx, 1, time.Hour); err != nil || len(ms) != 1 {
				t.Fatalf("Receive: %d, %v", len(ms), err)
			}
			if tc.watch {
				w, err := host.WatchExternal(ctx)
				if err != nil {
					t.Fatalf("WatchExternal: %v", err)
				}
				t.Cleanup(func() { w.Close() })
			}

			waited := make(chan error, 1)
			go func() { waited <- q.Wait(ctx, time.Minute) }()
			select {
			case err := <-waited:
				t.Fatalf("Wait returned before any send: %v", err)
			case <-time.After(200 * time.Millisecond):
			}

			sq, _ := sender.Queue(ctx, tc.queue)
			if _, err := sq.Send(ctx, []byte("new"), queue.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			limit := 10 * time.Second // generous for a loaded machine; far below the minute
			if !tc.wake {
				limit = time.Second
			}
			select {
			case err := <-waited:
				if !tc.wake {
					t.Fatalf("Wait returned (%v) though nothing for it was committed", err)
				}
				if err != nil {
					t.Fatalf("Wait: %v", err)
				}
				ms, err := q.Receive(ctx, 32, time.Minute)
				if err != nil || len(ms) != 1 || string(ms[0].Body) != "new" {
					t.Fatalf("after wake-up Receive = %d messages, %v; want the new one", len(ms), err)
				}
			case <-time.After(limit):
				if tc.wake {
					t.Fatalf("Wait still blocked %s after another process's send", limit)
				}
			}
		})
	}
}

// TestWatchExternalStopsWithBackend checks the watch ends when its Backend closes, so a
// host that forgets to Close the watcher leaks nothing.
func TestWatchExternalStopsWithBackend(t *testing.T) {
	ctx := context.Background()
	b, err := local.Open(ctx, filepath.Join(t.TempDir(), "q.db"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := b.WatchExternal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { w.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("watcher still running after the backend closed")
	}
}

// BenchmarkExternalWake measures the latency from another Backend's committed Send to the
// return of a blocked Wait (ns/op is one round: send, wake, receive, delete).
func BenchmarkExternalWake(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "q.db")
	host := openStore(b, path, local.Options{})
	sender := openStore(b, path, local.Options{})
	w, err := host.WatchExternal(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	q, _ := host.Queue(ctx, "jobs")
	sq, _ := sender.Queue(ctx, "jobs")
	var wake time.Duration
	for b.Loop() {
		waited := make(chan struct{})
		go func() { q.Wait(ctx, time.Minute); close(waited) }()
		time.Sleep(time.Millisecond)
		start := time.Now()
		if _, err := sq.Send(ctx, []byte("x"), queue.SendOptions{}); err != nil {
			b.Fatal(err)
		}
		<-waited
		wake += time.Since(start)
		ms, err := q.Receive(ctx, 1, time.Minute)
		if err != nil || len(ms) != 1 {
			b.Fatalf("Receive: %d, %v", len(ms), err)
		}
		if err := q.Delete(ctx, ms[0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(wake.Microseconds())/float64(b.N), "µs-send-to-wake")
}

// BenchmarkWatchOverhead measures what the watch costs a busy host: every commit of its own
// writes the WAL and so wakes the watcher, which then runs its range query. The workload is a
// host's: 4 workers receive 32, send 32 outputs, delete the 32 (SyncNormal, so the fsync does
// not hide the overhead). Compare the msg/s of watch=off and watch=on.
//
//	go test ./listener/local -run '^$' -bench WatchOverhead -benchtime 3x
func BenchmarkWatchOverhead(b *testing.B) {
	const n = 20_000
	for _, watch := range []bool{false, true} {
		name := "watch=off"
		if watch {
			name = "watch=on"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				be := openStore(b, filepath.Join(b.TempDir(), "q.db"), local.Options{Sync: local.SyncNormal})
				if watch {
					w, err := be.WatchExternal(ctx)
					if err != nil {
						b.Fatal(err)
					}
					defer w.Close()
				}
				in, _ := be.Queue(ctx, "in")
				out, _ := be.Queue(ctx, "out")
				fill(b, in, n)
				b.StartTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							ms, err := in.Receive(ctx, queue.MaxBatch, time.Minute)
							if err != nil || len(ms) == 0 {
								return
							}
							bodies := make([][]byte, len(ms))
							for j, m := range ms {
								bodies[j] = m.Body
							}
							if _, err := out.SendBatch(ctx, bodies, queue.SendOptions{}); err != nil {
								b.Error(err)
								return
							}
							in.DeleteBatch(ctx, ms)
						}
					}()
				}
				wg.Wait()
				elapsed += time.Since(start)
				if d, _ := out.Depth(ctx); d != n {
					b.Fatalf("%d outputs, want %d", d, n)
				}
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "msg/s")
		})
	}
}
