package host

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// noisyRun is one measurement: tenant B drains its backlog, optionally next to tenant A
// whose every message spins until the tenant's time limit.
type noisyRun struct {
	bRate  float64 // B's messages per second
	aPeak  int64   // most A calls in flight at once
	bPeak  int64   // most B calls in flight at once
	aLeft  int64   // A messages still queued when B finished: B did not wait for them
	bWaits int64   // B calls that queued in the scheduler for a slot
}

const (
	noisyB       = 400 // B's backlog
	noisyA       = 400 // A's backlog: far more than A can spin through while B drains
	noisyTimeout = 200 * time.Millisecond
)

// runNoisy builds a host with tenant B (echo) and, when aCap >= 0, tenant A (spinning
// guest, max_concurrency aCap; 0 = uncapped) under a host-wide budget, fills A's backlog
// first, waits until A spins, then times B's drain.
func runNoisy(t testing.TB, aCap int) noisyRun {
	t.Helper()
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	spin := abs(t, "../runtime/testdata/guest/guest.wasm")
	tenants := fmt.Sprintf(`  b:
    bindings:
      echo: {queue: in, output: out, module: %q, max_workers: 4, pool: {max_instances: 4}, backoff: {min: 5ms, max: 20ms}}
`, echo)
	if aCap >= 0 {
		tenants += fmt.Sprintf(`  a:
    max_concurrency: %d
    limits: {timeout: %s}
    bindings:
      spin: {queue: in, module: %q, max_workers: 4, max_dequeue_count: 50, pool: {max_instances: 4}, backoff: {min: 5ms, max: 20ms}, poison: {base_delay: 5ms, max_delay: 10ms}}
`, aCap, noisyTimeout, spin)
	}
	// The budget fits A's cap and all of B's calls (4 workers x 4 instances): with A
	// capped, B never waits for a slot; uncapped, A's calls crowd B's out.
	h, _ := newHostWith(t, "max_concurrency: 17\n", tenants)
	stop := run(t, h)
	ctx := context.Background()
	var r noisyRun
	if aCap >= 0 {
		aq, err := h.OpenQueue(ctx, "a", "in")
		if err != nil {
			t.Fatal(err)
		}
		loops := make([][]byte, noisyA)
		for i := range loops {
			loops[i] = []byte("loop")
		}
		if _, err := sendBatch(t, aq, loops, 0); err != nil {
			t.Fatal(err)
		}
		_ = h.Notify("a", "in")
		eventually(t, "tenant A spinning", func() bool { return h.tenants["a"].limiter.Stats().Held > 0 })
	}
	// B's backlog becomes visible all at once, at begin: the drain is timed from there.
	bodies := make([][]byte, noisyB)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, "b-%d", i)
	}
	bq, err := h.OpenQueue(ctx, "b", "in")
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now().Add(2 * time.Second)
	if _, err := sendBatch(t, bq, bodies, time.Until(begin)); err != nil {
		t.Fatal(err)
	}
	if time.Now().After(begin) {
		t.Fatal("sending B's backlog took longer than its delay")
	}
	deadline := begin.Add(60 * time.Second)
	for depth(t, h, "b", "out") < noisyB {
		if time.Now().After(deadline) {
			t.Fatalf("tenant B drained %d of %d in 60s", depth(t, h, "b", "out"), noisyB)
		}
		time.Sleep(2 * time.Millisecond)
	}
	r.bRate = noisyB / time.Since(begin).Seconds()
	r.bPeak = h.tenants["b"].limiter.Stats().Peak
	r.bWaits = h.tenants["b"].limiter.Stats().Waits
	if aCap >= 0 {
		r.aPeak = h.tenants["a"].limiter.Stats().Peak
		r.aLeft = depth(t, h, "a", "in")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	return r
}

// sendBatch sends bodies in one transaction of the local store.
func sendBatch(t testing.TB, q queue.Queue, bodies [][]byte, delay time.Duration) ([]string, error) {
	t.Helper()
	b, ok := q.(interface {
		SendBatch(context.Context, [][]byte, queue.SendOptions) ([]string, error)
	})
	if !ok {
		t.Fatalf("queue %T has no SendBatch", q)
	}
	return b.SendBatch(context.Background(), bodies, queue.SendOptions{Delay: delay})
}

// TestNoisyNeighbour is issue 6's noisy-neighbour check, its deterministic part: tenant A
// (max_concurrency 1) spins until its time limit on every message of a deep backlog while
// tenant B drains its own. A never runs more than one call, B never waits for a slot and
// uses several, and B's whole backlog is done while A's is still queued. The contrast: with
// no cap, A takes more than one slot. B's throughput ratio (alone vs next to A) is a
// wall-clock figure that measures whatever else shares the machine, so it is a benchmark:
// BenchmarkNoisyNeighbour.
func TestNoisyNeighbour(t *testing.T) {
	if testing.Short() {
		t.Skip("drains two tenants' backlogs for several seconds")
	}
	capped := runNoisy(t, 1)
	t.Logf("tenant B next to capped A: %.0f msg/s (B peak %d calls, A peak %d, A still queued %d)",
		capped.bRate, capped.bPeak, capped.aPeak, capped.aLeft)
	if capped.aPeak > 1 {
		t.Errorf("tenant A ran %d calls at once; its cap is 1", capped.aPeak)
	}
	if capped.aLeft == 0 {
		t.Errorf("tenant A's backlog drained before B's: B's messages waited behind A's")
	}
	if capped.bWaits != 0 {
		t.Errorf("%d of tenant B's calls waited for a slot next to capped A", capped.bWaits)
	}
	if capped.bPeak < 2 {
		t.Errorf("tenant B peaked at %d call at once next to A; want it to use the free slots", capped.bPeak)
	}

	uncapped := runNoisy(t, 0)
	t.Logf("contrast, A uncapped: A peak %d calls at once, %d of B's calls waited for a slot", uncapped.aPeak, uncapped.bWaits)
	fmt.Printf("contrast (tenant A uncapped): A peak concurrency %d\n", uncapped.aPeak)
	if uncapped.aPeak <= 1 {
		t.Errorf("uncapped tenant A peaked at %d call; the contrast needs it to take more", uncapped.aPeak)
	}
}

// BenchmarkNoisyNeighbour measures tenant B's throughput next to a capped spinning tenant A
// as a ratio of its throughput alone, both measured in the same run (reported as
// b-ratio; issue 6's target is at least 0.45 on a quiet 2-core machine).
//
//	go test -run '^$' -bench NoisyNeighbour -benchtime 2x ./host
func BenchmarkNoisyNeighbour(b *testing.B) {
	var alone, capped float64
	for b.Loop() {
		alone += runNoisy(b, -1).bRate
		capped += runNoisy(b, 1).bRate
	}
	b.ReportMetric(capped/alone, "b-ratio")
	b.ReportMetric(alone/float64(b.N), "b-alone-msg/s")
	b.ReportMetric(capped/float64(b.N), "b-next-to-a-msg/s")
	fmt.Printf("tenant B throughput ratio: %.2f\n", capped/alone)
}
