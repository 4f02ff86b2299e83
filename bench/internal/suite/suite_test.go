package suite

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/engine"
)

func testSetup(t *testing.T) (engine.Paths, *Stores) {
	t.Helper()
	repo, err := engine.FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := engine.FindExtismWasm(".")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.MkdirTemp("", "wqbench-suite-cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cache) })
	st := &Stores{Dir: t.TempDir(), Repo: repo}
	t.Cleanup(func() { st.Close() })
	return engine.Paths{Repo: repo, ExtismWasm: wasm, CacheDir: cache}, st
}

// TestRunCountsEveryMessage runs small workloads through each consumer on the durable local
// backend and checks what the report relies on: every message handled once, a rate, queue
// calls per message that match the consumer's design (a batched delete per 32 for the
// listener, two calls per message for the naive loop), latency percentiles, CPU and RSS.
func TestRunCountsEveryMessage(t *testing.T) {
	ctx := context.Background()
	paths, stores := testSetup(t)
	tests := []struct {
		kind         consumer.Kind
		minPM, maxPM float64 // queue calls per message
	}{
		{consumer.Listener, 0.02, 0.3},
		{consumer.Naive, 2, 2.1},
		{consumer.Poller, 1, 1.2},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind), func(t *testing.T) {
			var progressed atomic.Int64
			r, err := Run(ctx, stores, paths, RunOptions{
				Backend: Local, Consumer: tc.kind, Engine: engine.Go, Logic: engine.Vowels,
				Messages: 300, Size: 128, Workers: 2, Push: true, Timeout: time.Minute,
				Progress: func(n int64) {
					for p := progressed.Load(); n > p && !progressed.CompareAndSwap(p, n); p = progressed.Load() {
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Handled != 300 || progressed.Load() != 300 {
				t.Errorf("handled %d, progress %d, want 300", r.Handled, progressed.Load())
			}
			if r.MsgPerSec <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.RSSBytes <= 0 {
				t.Errorf("rate %v p50 %v p99 %v rss %d", r.MsgPerSec, r.P50, r.P99, r.RSSBytes)
			}
			if r.CallsPerMsg < tc.minPM || r.CallsPerMsg > tc.maxPM {
				t.Errorf("queue calls per message %.3f, want %.2f..%.2f (%+v)", r.CallsPerMsg, tc.minPM, tc.maxPM, r.Calls)
			}
		})
	}
}

func TestRunRejectsCountAsHandled(t *testing.T) {
	paths, stores := testSetup(t)
	bodies := Bodies(engine.Billing, 5, 0)
	if len(bodies) != 5 {
		t.Fatalf("%d bodies", len(bodies))
	}
	for _, b := range bodies {
		if _, err := engine.BillingNative(b); err != nil {
			t.Fatalf("Bodies gave a transaction billing rejects: %s", b)
		}
	}
	r, err := Run(context.Background(), stores, paths, RunOptions{Backend: Memory, Consumer: consumer.Listener, Engine: engine.Go, Logic: engine.Billing, Messages: 100, Push: true, Timeout: time.Minute})
	if err != nil || r.Handled != 100 || r.Rejected != 0 {
		t.Fatalf("handled %d rejected %d err %v", r.Handled, r.Rejected, err)
	}
}

func TestIdleListenerWithPushMakesNoCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("watches idle queues for seconds")
	}
	_, stores := testSetup(t)
	rows, err := MeasureIdle(context.Background(), stores, IdleOptions{Backend: Local, Window: 2 * time.Second, Workers: 2, Burst: 40})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]IdleRow{}
	for _, r := range rows {
		byName[r.Consumer] = r
	}
	push := byName["wqhost listener (push wake-ups)"]
	naive := byName["naive loop (receive 1, 100 ms sleep)"]
	if push.Calls.Transactions != 0 {
		t.Errorf("push listener made %d billed calls while idle", push.Calls.Transactions)
	}
	// Two goroutines polling every 100 ms for 2 s: about 40 receives.
	if naive.Calls.Receive < 20 {
		t.Errorf("naive loop made %d receives in 2 s, want about 40", naive.Calls.Receive)
	}
}

func TestRatio(t *testing.T) {
	rows := []PerCallRow{
		{Logic: engine.Noop, Engine: engine.Wqhost, NsPerCall: 1000},
		{Logic: engine.Noop, Engine: engine.Extism, NsPerCall: 40000},
	}
	if got := Ratio(rows, engine.Noop, engine.Extism, engine.Wqhost); got != 40 {
		t.Errorf("ratio %v, want 40", got)
	}
	if got := Ratio(rows, engine.Vowels, engine.Extism, engine.Wqhost); got != 0 {
		t.Errorf("missing logic: ratio %v, want 0", got)
	}
}
