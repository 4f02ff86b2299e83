package azure_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/azure/azuritetest"
	"github.com/wqhost/wqhost/listener/queue"
)

// benchN is the backlog each iteration drains: 1000 (100 in -short mode, CI's smoke run of
// every benchmark). Azurite's deletes scan the queue, so a much longer backlog would measure
// the emulator rather than the consumers.
func benchN() int {
	if testing.Short() {
		return 100
	}
	return 1000
}

// benchWork is the handler's processing time per message: a handler doing a little I/O
// (a database write, an HTTP call). Both consumers run the same handler.
const benchWork = 2 * time.Millisecond

func benchHandler(context.Context, *queue.Message) error {
	time.Sleep(benchWork)
	return nil
}

// BenchmarkAzure drains a backlog of benchN() messages from Azurite with the listener (batch
// 32, workers auto-scaled up to 16) and with a naive loop (receive 1, process, delete, one
// worker), both running the same 2 ms handler. Each reports msg/s and tx/msg: storage
// transactions per processed message, counted by the backend, the enqueue excluded. The
// listener also reports its speed-up over the naive loop of the same run.
//
//	go test -run '^$' -bench Azure ./listener/...
func BenchmarkAzure(b *testing.B) {
	server(b) // skip early when Azurite is unavailable
	var naiveRate float64
	b.Run("naive", func(b *testing.B) {
		naiveRate = benchDrain(b, "naive", func(b *testing.B, _ *azure.Backend, q *azure.Queue) {
			ctx := context.Background()
			for done := 0; done < benchN(); {
				ms, err := q.Receive(ctx, 1, 30*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if len(ms) == 0 {
					b.Fatalf("queue empty after %d of %d messages", done, benchN())
				}
				if err := benchHandler(ctx, ms[0]); err != nil {
					b.Fatal(err)
				}
				if err := q.Delete(ctx, ms[0]); err != nil {
					b.Fatal(err)
				}
				done++
			}
		})
	})
	// listener: the library's defaults (handler slots = workers × batch); binding: a wqhost
	// binding's defaults (pool max_instances 4: 4 handler slots, 4 prefetched).
	for _, v := range []struct {
		name string
		mod  func(*listener.Config)
	}{
		{"listener", nil},
		{"binding", func(c *listener.Config) { c.Concurrency, c.HandlerSlots = 4, 4 }},
	} {
		benchListener(b, v.name, v.mod, naiveRate)
	}
}

func benchListener(b *testing.B, name string, mod func(*listener.Config), naiveRate float64) {
	b.Run(name, func(b *testing.B) {
		var peakIdle int
		rate := benchDrain(b, name, func(b *testing.B, be *azure.Backend, q *azure.Queue) {
			l, stop := run(b, be, q, benchHandler, mod)
			deadline := time.Now().Add(2 * time.Minute)
			for st := l.State(); st.Processed < uint64(benchN()); st = l.State() {
				if time.Now().After(deadline) {
					b.Fatalf("drain stalled: listener state %+v, queue stats %+v", st, q.Stats())
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			if err := stop(); err != nil {
				b.Fatal(err)
			}
			st := l.State()
			if st.Processed != uint64(benchN()) || st.Failed != 0 || st.LeasesLost != 0 {
				b.Fatalf("processed %d, failed %d, leases lost %d; want %d, 0, 0", st.Processed, st.Failed, st.LeasesLost, benchN())
			}
			peakIdle = max(peakIdle, st.PeakLeasedIdle)
			b.Logf("peak workers %d, receives %d (%d empty), depth queries %d, peak leased idle %d", st.PeakWorkers, st.Receives, st.EmptyReceives, st.DepthQueries, st.PeakLeasedIdle)
		})
		b.ReportMetric(float64(peakIdle), "peak-leased-idle")
		if naiveRate > 0 {
			b.ReportMetric(rate/naiveRate, "x-naive")
		}
	})
}

// benchDrain runs drain over a fresh backlog of benchN() messages per iteration and reports
// msg/s and tx/msg; it returns msg/s. Each iteration gets its own Azurite: the emulator's
// periodic mark-and-sweep over everything it ever stored can stall it for a long time once
// a few thousand messages went through, which would measure the emulator's history.
func benchDrain(b *testing.B, label string, drain func(*testing.B, *azure.Backend, *azure.Queue)) float64 {
	var elapsed time.Duration
	var tx uint64
	for i := range b.N {
		b.StopTimer()
		srv, err := azuritetest.StartServer(context.Background(), azuritetest.Options{InMemory: true})
		if err != nil {
			azuritetest.SkipOrFail(b, err)
		}
		b.Cleanup(func() { srv.Close() }) // after a failure; Close is idempotent
		be, err := azure.Open(context.Background(), azure.Options{ConnectionString: srv.ConnectionString(), CreateQueues: true})
		if err != nil {
			b.Fatal(err)
		}
		q, err := be.Queue(context.Background(), fmt.Sprintf("bench-%s-%d-%d", label, b.N, i))
		if err != nil {
			b.Fatal(err)
		}
		fill(b, q, benchN())
		before := total(be)
		b.StartTimer()
		start := time.Now()
		drain(b, be, q)
		elapsed += time.Since(start)
		b.StopTimer()
		after := total(be)
		tx += (after.Transactions() - after.Send) - (before.Transactions() - before.Send)
		if d, err := q.Depth(context.Background()); err != nil || d != 0 {
			b.Fatalf("Depth after the drain = %d, %v; want 0", d, err)
		}
		be.Close()
		if err := srv.Close(); err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(benchN()*b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "msg/s")
	b.ReportMetric(float64(tx)/float64(benchN()*b.N), "tx/msg")
	b.ReportMetric(0, "ns/op") // a drain per op: ns/op only restates msg/s
	return rate
}

func total(b *azure.Backend) azure.Stats {
	var sum azure.Stats
	for _, s := range b.Stats() {
		sum = sum.Add(s)
	}
	return sum
}
