package host

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/internal/breaker"
	"github.com/wqhost/wqhost/listener/queue"
)

// A binding whose every message spins to its time limit: its breaker opens, it stops
// leasing, and yet every message reaches the poison queue after max_dequeue_count
// attempts (each with its dequeue count, none sent back unattempted) within the bound the
// breaker promises: per attempt, a time limit plus the longest cool-down plus the poison
// policy's retry delay, the attempts of several messages one after another while it probes.
// A message that then succeeds closes the breaker again.
func TestSpinningBindingBacksOffAndStillPoisons(t *testing.T) {
	const (
		msgs     = 2
		dequeues = 3
		// Long enough for the guest's start function under -race on a loaded machine: a
		// load runs it under the time limit too.
		timeout = 300 * time.Millisecond
	)
	spin := abs(t, "../runtime/testdata/guest/guest.wasm")
	h, _ := newHostWith(t, "", fmt.Sprintf(`  a:
    limits: {timeout: %s}
    bindings:
      spin: {queue: in, module: %q, max_dequeue_count: %d, pool: {max_instances: 4}, backoff: {min: 5ms, max: 20ms}, poison: {base_delay: 5ms, max_delay: 10ms}}
`, timeout, spin, dequeues))
	stop := run(t, h)
	t.Cleanup(func() { _ = stop() })
	bodies := make([]string, msgs)
	for i := range bodies {
		bodies[i] = "loop"
	}
	begin := time.Now()
	send(t, h, "a", "in", bodies...)
	perAttempt := timeout + breaker.MaxCooldown*timeout + 10*time.Millisecond
	bound := msgs*dequeues*perAttempt + 2*time.Second // + the host's own latency on a loaded machine
	for depth(t, h, "a", "in-poison") < msgs {
		if time.Since(begin) > bound {
			t.Fatalf("%d of %d spinning messages dead-lettered after %s (bound %s); breaker %s",
				depth(t, h, "a", "in-poison"), msgs, time.Since(begin), bound, bindingStatus(t, h, "a", "spin").Breaker.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d spinning messages dead-lettered in %s (bound %s)", msgs, time.Since(begin), bound)
	st := bindingStatus(t, h, "a", "spin")
	if st.Breaker.Trips == 0 {
		t.Errorf("the breaker never opened: %+v", st.Breaker)
	}
	for _, m := range drainBodies(t, h, "a", "in-poison") {
		if m.Attributes[queue.AttrDequeueCount] != fmt.Sprint(dequeues) {
			t.Errorf("dead letter %s at dequeue count %q, want %d: %v", m.ID, m.Attributes[queue.AttrDequeueCount], dequeues, m.Attributes)
		}
		if r := m.Attributes[queue.AttrReason]; !strings.Contains(r, "time limit") {
			t.Errorf("dead letter %s reason %q, want the time limit", m.ID, r)
		}
	}
	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()
	labels := `{binding="spin",queue="in",tenant="a"}`
	metrics := get(t, srv.URL+"/metrics", "", http.StatusOK)
	if !regexp.MustCompile(`wqhost_breaker_trips_total` + regexp.QuoteMeta(labels) + ` [1-9]`).MatchString(metrics) {
		t.Errorf("/metrics shows no breaker trip for a/spin")
	}
	if !strings.Contains(metrics, "wqhost_breaker_state"+labels) || !strings.Contains(metrics, "wqhost_binding_running"+labels) {
		t.Errorf("/metrics lacks wqhost_breaker_state or wqhost_binding_running for a/spin")
	}
	if js := get(t, srv.URL+"/v1/status", "", http.StatusOK); !regexp.MustCompile(`"breaker":\s*\{\s*"state":`).MatchString(js) {
		t.Errorf("/v1/status lacks the breaker: %s", js)
	}

	send(t, h, "a", "in", "status:0")
	eventually(t, "the breaker closed by a message that succeeds", func() bool {
		s := bindingStatus(t, h, "a", "spin")
		return s.Breaker.State == "closed" && s.Processed >= 1
	})
	if m := get(t, srv.URL+"/metrics", "", http.StatusOK); !strings.Contains(m, "wqhost_breaker_state"+labels+" 0") {
		t.Errorf("/metrics does not show the closed breaker as 0")
	}
}
