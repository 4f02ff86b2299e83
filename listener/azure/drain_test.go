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
	"github.com/wqhost/wqhost/plugins/builtin"
)

// TestAzuriteDefaultDrain is the drain a new user runs first: one listener with a binding's
// default config (max_workers 16, batch_size 32, pool max_instances 4 — so 4 handler slots —
// visibility 30s, the default back-off), 2000 messages, and a handler slower than the
// emulator's round trip. Leasing only what can start (4 slots + 4 prefetched) and renewing
// concurrently leave no message leased and unstarted long enough to lose its lease: every
// message is handled exactly once.
func TestAzuriteDefaultDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("drains 2000 messages through Azurite")
	}
	// Its own emulator: 2000 messages leave Azurite's in-memory store slow for a while (its
	// mark-and-sweep), which made the next test sharing it miss a lease renewal.
	s := azuritetest.Start(t)
	const n = 2000
	b := open(t, s, azure.EncodingBase64, func(o *azure.Options) { o.Retry = azure.RetryOptions{} })
	q := openQueue(t, b, "default-drain")
	fill(t, q, n)
	var got seen
	var peakIdle, peakLeased int
	l, stop := run(t, b, q, func(_ context.Context, m *queue.Message) error {
		time.Sleep(20 * time.Millisecond) // slower than the emulator's round trip
		got.add(m.Body)                   // the output: one per successful call
		return nil
	}, func(c *listener.Config) {
		c.MaxWorkers, c.BatchSize, c.Concurrency, c.HandlerSlots = 16, 32, 4, 4
		c.VisibilityTimeout = 30 * time.Second
		c.MinIdle, c.MaxIdle = 0, 0                              // the defaults, 100ms..60s
		c.Backoff = builtin.NewBackoff(builtin.BackoffOptions{}) // defaults: 100ms..60s
	})
	deadline := time.Now().Add(5 * time.Minute)
	for st := l.State(); st.Processed < n; st = l.State() {
		peakIdle, peakLeased = max(peakIdle, st.LeasedIdle), max(peakLeased, st.Leased)
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 5m: state %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got.mu.Lock()
	outputs, dups := 0, 0
	for _, k := range got.n {
		outputs += k
		dups += k - 1
	}
	got.mu.Unlock()
	lost := len(got.missing(n))
	st := l.State()
	fmt.Printf("azurite default drain: sent=%d outputs=%d duplicates=%d lost=%d\n", n, outputs, dups, lost)
	t.Logf("leased at most %d (bound 8), leased idle at most %d (peak counter %d), leases lost %d, receives %d",
		peakLeased, peakIdle, st.PeakLeasedIdle, st.LeasesLost, st.Receives)
	if dups != 0 || lost != 0 || outputs != n {
		t.Errorf("outputs %d, duplicates %d, lost %d; want %d, 0, 0", outputs, dups, lost, n)
	}
	if peakLeased > 8 || st.PeakLeasedIdle > 8 {
		t.Errorf("leased %d, leased idle peaked at %d: want at most handler slots + prefetch = 8", peakLeased, st.PeakLeasedIdle)
	}
}
