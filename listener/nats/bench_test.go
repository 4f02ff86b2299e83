package nats_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"

	"github.com/wqhost/wqhost/listener/local"
	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/nats/natstest"
	"github.com/wqhost/wqhost/listener/queue"
)

// drainQueue empties q with 4 goroutines, each receiving 32 and deleting them in one
// DeleteBatch, and returns the number deleted.
func drainQueue(tb testing.TB, q queue.Queue) int {
	ctx := context.Background()
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				ms, err := q.Receive(ctx, queue.MaxBatch, time.Minute)
				if err != nil {
					tb.Errorf("Receive: %v", err)
					return
				}
				if len(ms) == 0 {
					return
				}
				for i, err := range q.(queue.Batcher).DeleteBatch(ctx, ms) {
					if err != nil {
						tb.Errorf("Delete %s: %v", ms[i].ID, err)
						return
					}
				}
				mu.Lock()
				total += len(ms)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return total
}

func fillQueue(tb testing.TB, q queue.Queue, n int) {
	body := make([]byte, 100)
	for range n {
		if _, err := q.Send(context.Background(), body, queue.SendOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkDrain drains 5,000 100-byte messages (500 in -short mode; receive 32, delete the batch, 4 goroutines)
// from a file-backed JetStream stream on an embedded server and, in the same run, from the
// local store (fsync on), and prints the figures the JetStream issue asks for: the ratio of
// the two, the client messages (requests) per drained message, the idle requests per hour
// (held pulls at the default pull_hold, nothing else, checked over an idle window), and the
// time from a publish by another client to the receive that hands it out on an idle queue.
//
//	go test ./listener/nats -run '^$' -bench BenchmarkDrain -benchtime 1x
func BenchmarkDrain(b *testing.B) {
	n, window, wakeups := 5000, 3*time.Second, 20
	if testing.Short() {
		n, window, wakeups = 500, time.Second, 5 // CI's smoke run of every benchmark
	}
	s, err := natstest.Start(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: b.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Shutdown()
	url := s.ClientURL()
	var natsRate, localRate, reqPerMsg float64
	for i := 0; i < b.N; i++ {
		be := open(b, url, func(o *wqnats.Options) { o.MemoryStorage = false; o.AckWait = time.Minute })
		q, err := be.Queue(context.Background(), "bench")
		if err != nil {
			b.Fatal(err)
		}
		fillQueue(b, q, n)
		out := be.Conn().Stats().OutMsgs
		start := time.Now()
		if got := drainQueue(b, q); got != n {
			b.Fatalf("drained %d of %d", got, n)
		}
		natsRate = float64(n) / time.Since(start).Seconds()
		reqPerMsg = float64(be.Conn().Stats().OutMsgs-out) / float64(n)

		lb, err := local.Open(context.Background(), filepath.Join(b.TempDir(), "q.db"), local.Options{})
		if err != nil {
			b.Fatal(err)
		}
		lq, err := lb.Queue(context.Background(), "bench")
		if err != nil {
			b.Fatal(err)
		}
		fillQueue(b, lq, n)
		start = time.Now()
		if got := drainQueue(b, lq); got != n {
			b.Fatalf("local drained %d of %d", got, n)
		}
		localRate = float64(n) / time.Since(start).Seconds()
		lb.Close()
	}
	b.ReportMetric(natsRate, "nats-msg/s")
	b.ReportMetric(localRate, "local-msg/s")

	// Idle: a watched queue at the default pull_hold sends one held pull and nothing else.
	be := open(b, url, func(o *wqnats.Options) { o.MemoryStorage = false })
	q, err := be.Queue(context.Background(), "idle")
	if err != nil {
		b.Fatal(err)
	}
	out := be.Conn().Stats().OutMsgs
	_, _, stop, _ := q.Watch(context.Background())
	time.Sleep(window)
	idleSent := be.Conn().Stats().OutMsgs - out
	stop()
	perHour := time.Hour / (15 * time.Minute) // one held pull per default pull_hold
	if idleSent > 1 {
		b.Fatalf("idle for %s the client sent %d messages; want the one held pull", window, idleSent)
	}

	// Wake-up: publish from another client to an idle watched queue; time to the receive.
	nc, err := natsgo.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	var lat []time.Duration
	for range wakeups {
		ch, in, stop, _ := q.Watch(context.Background())
		if in != -1 {
			b.Fatalf("watch on an empty queue: %s", in)
		}
		time.Sleep(20 * time.Millisecond) // the pull is held
		start := time.Now()
		if err := nc.Publish(q.Subject(), []byte("x")); err != nil {
			b.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			b.Fatal("the publish did not wake the watch")
		}
		stop()
		ms, err := q.Receive(context.Background(), 32, time.Minute)
		if err != nil || len(ms) != 1 {
			b.Fatalf("receive after wake-up: %d, %v", len(ms), err)
		}
		lat = append(lat, time.Since(start))
		if err := q.Delete(context.Background(), ms[0]); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(lat)
	fmt.Printf("nats drain msg/s: %.0f (local: %.0f); requests/msg: %.2f; idle requests/hour: %d (one held pull per 15m pull_hold; %d sent in %s idle); idle publish-to-receive p50 %s p95 %s\n",
		natsRate, localRate, reqPerMsg, perHour, idleSent, window, lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*95/100].Round(10*time.Microsecond))
}
