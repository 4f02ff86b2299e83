package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"

	dto "github.com/prometheus/client_model/go"
)

// series counts the series of h's registry carrying label (any value), and returns the
// value of the series named name whose labels include want.
func series(t *testing.T, h *Host, label, name string, want map[string]string) (count int, value float64, found bool) {
	t.Helper()
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if _, ok := labels[label]; ok {
				if mf.GetType() == dto.MetricType_HISTOGRAM {
					count += len(m.GetHistogram().GetBucket()) + 3 // buckets, +Inf, sum, count
				} else {
					count++
				}
			}
			if mf.GetName() != name {
				continue
			}
			match := true
			for k, v := range want {
				match = match && labels[k] == v
			}
			if match {
				found = true
				switch {
				case m.GetCounter() != nil:
					value = m.GetCounter().GetValue()
				case m.GetGauge() != nil:
					value = m.GetGauge().GetValue()
				}
			}
		}
	}
	return count, value, found
}

// TestMetricsPerBindingCardinality: with metrics.per_binding (the default) each binding
// has seriesPerBinding series (the figure the README's cardinality row quotes); with false
// no series carries a binding label, the same names are summed per tenant, and the breaker
// state is served as bindings per state.
func TestMetricsPerBindingCardinality(t *testing.T) {
	for _, tc := range []struct {
		top        string
		perBinding bool
	}{
		{"", true},
		{"metrics: {per_binding: true}\n", true},
		{"metrics: {per_binding: false}\n", false},
	} {
		t.Run(fmt.Sprint("per_binding=", tc.perBinding, tc.top != ""), func(t *testing.T) {
			h, _ := newHostWith(t, tc.top, bindingsYAML(t, 2, 3))
			defer func() { _ = h.Close(context.Background()) }()
			perBinding, _, _ := series(t, h, "binding", "", nil)
			perTenant, workers, found := series(t, h, "tenant", "wqhost_workers", map[string]string{"tenant": "t1"})
			if !found {
				t.Fatalf("no wqhost_workers series of tenant t1")
			}
			_, digestBindings, _ := series(t, h, "", "wqhost_module_info", map[string]string{"tenant": "t1"})
			if tc.perBinding {
				if seriesPerBinding != 52 {
					t.Errorf("seriesPerBinding = %d: the README, docs/configuration.md and docs/guarantees.md quote 52", seriesPerBinding)
				}
				if perBinding != 6*seriesPerBinding {
					t.Errorf("%d series with a binding label, want 6 bindings × %d", perBinding, seriesPerBinding)
				}
				if _, _, ok := series(t, h, "", "wqhost_tenant_breakers", nil); ok {
					t.Errorf("wqhost_tenant_breakers served per binding")
				}
				return
			}
			if perBinding != 0 {
				t.Errorf("%d series with a binding label, want none", perBinding)
			}
			// A tenant: the binding series summed (but the two states), tenant_running,
			// tenant_fuel_total, 3 breaker states, its memory budget, refusals and 5
			// consumers reserved (instances, kernel, modules, messages, stacks).
			if want := 2 * (seriesPerBinding - 2 + 2 + 3 + 7); perTenant != want {
				t.Errorf("%d series with a tenant label, want %d", perTenant, want)
			}
			if workers != 0 {
				t.Errorf("wqhost_workers of an idle tenant = %v before Run", workers)
			}
			if digestBindings != 3 {
				t.Errorf("wqhost_module_info per tenant = %v, want its 3 bindings", digestBindings)
			}
			if _, closed, _ := series(t, h, "", "wqhost_tenant_breakers", map[string]string{"tenant": "t0", "state": "closed"}); closed != 3 {
				t.Errorf("wqhost_tenant_breakers{state=closed} = %v, want 3", closed)
			}
			if _, _, ok := series(t, h, "", "wqhost_breaker_state", nil); ok {
				t.Errorf("wqhost_breaker_state served per tenant")
			}
		})
	}
}

// TestQueueMessagesByState: a binding's input queue depth is served split by state, on
// /metrics (wqhost_queue_messages{state}) and in /v1/status (messages): a message released
// for a later retry counts as leased, one sent with a delay as delayed, from the listener's
// own depth reads.
func TestQueueMessagesByState(t *testing.T) {
	h, _ := newHost(t, fmt.Sprintf(`  t0:
    bindings:
      b0:
        queue: q0
        output: out
        module: %q
        max_dequeue_count: 5
        poison: {base_delay: 1h, max_delay: 1h}
`, abs(t, flakyWasm)))
	q, err := h.OpenQueue(t.Context(), "t0", "q0")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := q.Send(t.Context(), []byte("later"), queue.SendOptions{Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	send(t, h, "t0", "q0", "fail", "a", "b", "c")
	run(t, h)
	want := DepthSplit{Visible: 0, Leased: 1, Delayed: 2, Exact: true}
	var got DepthSplit
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s := h.Status(t.Context()).Tenants[0].Bindings[0]
		got = s.Messages
		if s.Processed == 3 && s.Retried == 1 && got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status messages = %+v (processed %d, retried %d), want %+v after 3 processed and 1 retried", got, s.Processed, s.Retried, want)
		}
	}
	js, err := json.Marshal(h.Status(t.Context()).Tenants[0].Bindings[0])
	if err != nil {
		t.Fatal(err)
	}
	if w := `"messages":{"visible":0,"leased":1,"delayed":2,"exact":true}`; !strings.Contains(string(js), w) {
		t.Errorf("status JSON has no %s:\n%s", w, js)
	}
	for state, v := range map[string]float64{"visible": 0, "leased": 1, "delayed": 2} {
		_, value, found := series(t, h, "", "wqhost_queue_messages", map[string]string{"tenant": "t0", "binding": "b0", "state": state})
		if !found || value != v {
			t.Errorf("wqhost_queue_messages{state=%q} = %v (found %v), want %v", state, value, found, v)
		}
	}
}
