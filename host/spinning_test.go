package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Issue 15's spinning-neighbour scenario: a healthy echo binding drains its backlog next to
// five bindings whose module loops to its time limit on every message (4 instances each),
// in the same tenant or in another one, with the host-wide settings users get by default.
const (
	spinHealthy  = 2000 // the healthy binding's backlog
	spinBacklog  = 200  // each spinning binding's backlog: more than it spins through meanwhile
	spinBindings = 5
	spinTimeout  = 500 * time.Millisecond
)

// spinPlace says where the spinning bindings live.
type spinPlace int

const (
	spinNone        spinPlace = iota // the healthy binding alone
	spinSameTenant                   // five spinning bindings in the healthy binding's tenant
	spinOtherTenant                  // five spinning bindings in another tenant
)

// runSpinning returns the healthy binding's throughput in messages per second.
func runSpinning(t testing.TB, place spinPlace) float64 {
	t.Helper()
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	spin := abs(t, "../runtime/testdata/guest/guest.wasm")
	healthy := fmt.Sprintf("      echo: {queue: in, output: out, module: %q, backoff: {min: 5ms, max: 20ms}}\n", echo)
	var spinners strings.Builder
	for i := range spinBindings {
		fmt.Fprintf(&spinners, "      spin%d: {queue: spin%d, module: %q, max_dequeue_count: 50, pool: {max_instances: 4}, backoff: {min: 5ms, max: 20ms}, poison: {base_delay: 5ms, max_delay: 10ms}}\n", i, i, spin)
	}
	limits := fmt.Sprintf("    limits: {timeout: %s}\n", spinTimeout)
	var tenants string
	spinTenant := "b"
	switch place {
	case spinNone:
		tenants = "  b:\n" + limits + "    bindings:\n" + healthy
	case spinSameTenant:
		tenants = "  b:\n" + limits + "    bindings:\n" + healthy + spinners.String()
	case spinOtherTenant:
		spinTenant = "a"
		tenants = "  b:\n" + limits + "    bindings:\n" + healthy + "  a:\n" + limits + "    bindings:\n" + spinners.String()
	}
	h, _ := newHostWith(t, "", tenants)
	stop := run(t, h)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	if place != spinNone {
		loops := make([][]byte, spinBacklog)
		for i := range loops {
			loops[i] = []byte("loop")
		}
		for i := range spinBindings {
			q, err := h.OpenQueue(ctx, spinTenant, fmt.Sprintf("spin%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sendBatch(t, q, loops, 0); err != nil {
				t.Fatal(err)
			}
			_ = h.Notify(spinTenant, fmt.Sprintf("spin%d", i))
		}
		// Let the spinners reach their steady state (every instance busy, and whatever
		// back-off the host applies to them) before the healthy backlog arrives.
		time.Sleep(3 * spinTimeout)
	}
	bodies := make([][]byte, spinHealthy)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, "h-%d", i)
	}
	q, err := h.OpenQueue(ctx, "b", "in")
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now().Add(time.Second)
	if _, err := sendBatch(t, q, bodies, time.Until(begin)); err != nil {
		t.Fatal(err)
	}
	if time.Now().After(begin) {
		t.Fatal("sending the healthy backlog took longer than its delay")
	}
	deadline := begin.Add(120 * time.Second)
	for depth(t, h, "b", "out") < spinHealthy {
		if time.Now().After(deadline) {
			t.Fatalf("the healthy binding drained %d of %d in 120s", depth(t, h, "b", "out"), spinHealthy)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return spinHealthy / time.Since(begin).Seconds()
}

// BenchmarkSpinning measures issue 15's target: a healthy binding's throughput next to five
// bindings spinning every message to their time limit, as a ratio of its throughput alone
// measured in the same run, with the spinners in its own tenant and in another tenant
// (target ≥ 0.5 for both).
//
//	go test -run '^$' -bench Spinning -benchtime 1x ./host
func BenchmarkSpinning(b *testing.B) {
	var alone, same, other float64
	for b.Loop() {
		alone += runSpinning(b, spinNone)
		same += runSpinning(b, spinSameTenant)
		other += runSpinning(b, spinOtherTenant)
	}
	n := float64(b.N)
	b.ReportMetric(same/alone, "same-tenant-ratio")
	b.ReportMetric(other/alone, "other-tenant-ratio")
	b.ReportMetric(alone/n, "alone-msg/s")
	fmt.Printf("healthy alone: %.0f msg/s; next to spinning neighbours: %.0f msg/s (same tenant), %.0f msg/s (other tenant)\n", alone/n, same/n, other/n)
	fmt.Printf("healthy ratio next to spinning neighbours: %.2f\n", same/alone)
	fmt.Printf("healthy ratio next to spinning neighbours (other tenant): %.2f\n", other/alone)
}
