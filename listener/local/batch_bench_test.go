package local_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// sinkCost is the fixed cost of the benchmark handler's one operation per call: a flush to
// a sink (a bulk insert, one HTTP request) that costs the same for one record or a hundred.
const sinkCost = time.Millisecond

// sinkHandler pays sinkCost once per call, for one message or a batch, and counts calls.
type sinkHandler struct{ calls *atomic.Int64 }

func (h sinkHandler) Handle(context.Context, *queue.Message) outcome.Outcome {
	h.calls.Add(1)
	time.Sleep(sinkCost)
	return outcome.Outcome{}
}

func (h sinkHandler) HandleBatch(_ context.Context, _ []*queue.Message, vs []outcome.Outcome) {
	h.calls.Add(1)
	time.Sleep(sinkCost)
	for i := range vs {
		vs[i] = outcome.Outcome{}
	}
}

// drainWith runs a listener shaped like a binding with the default pool (4 calls at once)
// over n queued messages and returns how long it took to process them all and the calls
// it made.
func drainWith(b *testing.B, n int, batch listener.BatchConfig) (time.Duration, int64) {
	b.Helper()
	ctx := context.Background()
	be, err := local.Open(ctx, filepath.Join(b.TempDir(), "q.db"), local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	q, _ := be.Queue(ctx, "sink")
	dl, _ := be.Queue(ctx, "sink"+queue.PoisonSuffix)
	fill(b, q, n)
	var calls atomic.Int64
	l, err := listener.New(listener.Config{
		Queue: q, DeadLetter: dl, Handler: sinkHandler{&calls}, Batch: batch,
		Backoff: builtin.NewBackoff(builtin.BackoffOptions{}), Scaler: builtin.NewTarget(0),
		Poison:       builtin.NewPoison(builtin.PoisonOptions{}),
		HandlerSlots: 4, Concurrency: 4,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- l.Run(rctx) }()
	defer func() { cancel(); <-done }()
	deadline := start.Add(10 * time.Minute)
	for int(l.State().Processed) < n {
		if time.Now().After(deadline) {
			b.Fatalf("processed %d of %d in 10 minutes", l.State().Processed, n)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start), calls.Load()
}

// BenchmarkBatchSink compares a handler whose cost is one fixed-cost operation per call
// (sinkCost) run on batches of 100 against one message per call, on the local store with
// a binding's default shape, in one run. It prints "batch/single msg/s: R".
func BenchmarkBatchSink(b *testing.B) {
	const n = 4000
	var single, batched time.Duration
	var calls int64
	for b.Loop() {
		d, _ := drainWith(b, n, listener.BatchConfig{})
		single += d
		d, c := drainWith(b, n, listener.BatchConfig{MaxMessages: 100})
		batched += d
		calls += c
	}
	sRate := float64(n*b.N) / single.Seconds()
	bRate := float64(n*b.N) / batched.Seconds()
	b.ReportMetric(sRate, "single-msg/s")
	b.ReportMetric(bRate, "batch-msg/s")
	b.ReportMetric(bRate/sRate, "batch/single")
	b.ReportMetric(float64(n*b.N)/float64(calls), "msgs/batch-call")
	fmt.Printf("batch/single msg/s: %.1f (batch of 100: %.0f msg/s, one per call: %.0f msg/s; %s per call, local store, 4 calls at once)\n",
		bRate/sRate, bRate, sRate, sinkCost)
}
