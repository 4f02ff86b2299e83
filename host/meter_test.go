package host

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/listener/queue"
)

// TestMeteringPerMessageSumsToTenant: every handler call is metered (docs/metering.md), and
// the failing attempt's figures are written on its dead letter. The real TinyGo vowels
// example, bound without an output queue, cannot emit its result and asks for a retry, which
// max_dequeue_count 1 turns into a dead letter after one attempt: so each of N messages has
// exactly one metered call, whose fuel its dead letter carries. Their sum is the tenant's
// wqhost_tenant_fuel_total, the binding's wqhost_handler_fuel_total and /v1/status's usage.
func TestMeteringPerMessageSumsToTenant(t *testing.T) {
	const n = 20
	h, _ := newHost(t, `  acme:
    bindings:
      vowels:
        queue: in
        module: builtin:count-vowels-tinygo
        max_dequeue_count: 1
        backoff: {min: 5ms, max: 50ms}
`)
	run(t, h)
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = strings.Repeat("a quick brown fox jumps over the lazy dog ", 4)
	}
	send(t, h, "acme", "in", bodies...)
	eventually(t, fmt.Sprintf("%d dead letters", n), func() bool { return depth(t, h, "acme", "in-poison") == n })

	var sum, lo, hi uint64
	var fuels []uint64
	for i, m := range drainBodies(t, h, "acme", "in-poison") {
		a := m.Attributes
		fuel, err := strconv.ParseUint(a[queue.AttrFuel], 10, 64)
		if err != nil || fuel == 0 {
			t.Fatalf("dead letter %s: %s=%q: want a positive fuel figure (attributes %v)", m.ID, queue.AttrFuel, a[queue.AttrFuel], a)
		}
		for _, k := range []string{queue.AttrWallUs, queue.AttrHostUs, queue.AttrMemoryBytes, queue.AttrHTTPRequests, queue.AttrHTTPBytes} {
			if _, err := strconv.ParseUint(a[k], 10, 64); err != nil {
				t.Fatalf("dead letter %s: %s=%q: %v", m.ID, k, a[k], err)
			}
		}
		if mem, _ := strconv.ParseUint(a[queue.AttrMemoryBytes], 10, 64); mem == 0 {
			t.Fatalf("dead letter %s: no memory high-water mark", m.ID)
		}
		if _, ok := a[queue.AttrBatchSize]; ok {
			t.Fatalf("dead letter %s of a single call says %s", m.ID, queue.AttrBatchSize)
		}
		sum += fuel
		fuels = append(fuels, fuel)
		if i == 0 || fuel < lo {
			lo = fuel
		}
		hi = max(hi, fuel)
	}
	_, tenantFuel, found := series(t, h, "", "wqhost_tenant_fuel_total", map[string]string{"tenant": "acme"})
	if !found {
		t.Fatal("no wqhost_tenant_fuel_total{tenant=acme}")
	}
	_, bindingFuel, _ := series(t, h, "", "wqhost_handler_fuel_total", map[string]string{"tenant": "acme", "binding": "vowels"})
	bs := bindingStatus(t, h, "acme", "vowels")
	match := uint64(tenantFuel) == sum && uint64(bindingFuel) == sum && bs.Usage.Fuel == sum && bs.Usage.Calls == n
	f := strconv.FormatUint(sum/n, 10)
	if lo != hi {
		f = fmt.Sprintf("%d..%d (mean %d)", lo, hi, sum/n)
	}
	t.Logf("metering: fuel per vowels message=%s, sum over tenant matches per-message sum=%v", f, match)
	fmt.Printf("metering: fuel per vowels message=%s, sum over tenant matches per-message sum=%v\n", f, match)
	if !match {
		t.Fatalf("per-message fuel sums to %d over %d dead letters; wqhost_tenant_fuel_total %v, wqhost_handler_fuel_total %v, status %d over %d calls",
			sum, n, tenantFuel, bindingFuel, bs.Usage.Fuel, bs.Usage.Calls)
	}
	// The same message must cost about the same: figures that grew with the instance's
	// history would not be per call. The first message on an instance also builds the
	// handler's vowel table (count-vowels prepares it once per instance), so a few cost more:
	// at most one per instance, and the pool runs far fewer instances than n messages.
	steady := 0
	for _, f := range fuels {
		if f <= lo+lo/2 {
			steady++
		}
	}
	if steady < n/2 {
		t.Fatalf("only %d of %d messages cost within 1.5x of the cheapest (%d..%d fuel): metering is not per call", steady, n, lo, hi)
	}
}
