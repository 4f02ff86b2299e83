package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/runtime"
)

// tenantBinding is a tenant's single binding "w" on the memory backend, reading in and
// writing out, with quick back-off.
func tenantBinding(module string, extra string) string {
	return fmt.Sprintf("    bindings:\n      w: {backend: mem, queue: in, output: out, module: %q, backoff: {min: 5ms, max: 20ms}%s}\n", module, extra)
}

// rawQueue opens a tenant's queue on the host's own backend whether or not the tenant is
// still configured (h.OpenQueue knows configured tenants only).
func rawQueue(t *testing.T, h *Host, tenant, queue string) queue.Queue {
	t.Helper()
	ctx := context.Background()
	b, err := h.backs.Get(ctx, "mem")
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.Open(ctx, h.cfg.PhysicalQueue(tenant, "mem", queue))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// seriesOf counts the metric series labelled tenant=name.
func seriesOf(t *testing.T, h *Host, name string) int {
	t.Helper()
	mfs, err := h.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == name {
					n++
				}
			}
		}
	}
	return n
}

func tenantReloadOf(res ReloadResult, name string) (TenantReload, bool) {
	for _, tr := range res.Tenants {
		if tr.Tenant == name {
			return tr, true
		}
	}
	return TenantReload{}, false
}

// TestHotReloadTenantAdded: a tenant added to the config file starts serving with its
// token and metrics; the tenant already running keeps its binding (not restarted) and
// goes on processing; the reload result reports the tenant and its binding as added.
func TestHotReloadTenantAdded(t *testing.T) {
	t.Setenv("TEST_WQ_A_TOKEN", "a-secret")
	t.Setenv("TEST_WQ_B_TOKEN", "b-secret")
	a := "  a:\n    token_env: TEST_WQ_A_TOKEN\n" + tenantBinding("handler.wasm", "")
	h, dir := reloadHost(t, a)
	h.debounce = time.Hour // explicit reloads only
	stop := run(t, h)
	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()
	send(t, h, "a", "in", "1")
	eventually(t, "a's first output", func() bool { return depth(t, h, "a", "out") == 1 })
	aBefore := h.bindingNamed("a", "w")
	get(t, srv.URL+"/v1/status", "b-secret", 401)

	writeConfig(t, dir, a+"  b:\n    token_env: TEST_WQ_B_TOKEN\n    weight: 3\n"+tenantBinding("handler.wasm", ""))
	res, err := h.ReloadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tr, ok := tenantReloadOf(res, "b"); !ok || tr.Result != ReloadAdded {
		t.Errorf("reload result tenants = %+v, want b added", res.Tenants)
	}
	if _, ok := tenantReloadOf(res, "a"); ok {
		t.Errorf("reload result reports the untouched tenant a: %+v", res.Tenants)
	}
	for _, br := range res.Bindings {
		want := map[string]string{"a": ReloadUnchanged, "b": ReloadAdded}[br.Tenant]
		if br.Result != want {
			t.Errorf("binding %s/%s: result %q, want %q", br.Tenant, br.Binding, br.Result, want)
		}
	}
	js, _ := json.Marshal(res)
	if !strings.Contains(string(js), `"tenants":[{"tenant":"b","result":"added"}]`) {
		t.Errorf("reload JSON does not report the added tenant: %s", js)
	}
	if h.bindingNamed("a", "w") != aBefore {
		t.Error("adding a tenant restarted another tenant's binding")
	}

	send(t, h, "b", "in", "hello")
	send(t, h, "a", "in", "2")
	eventually(t, "the added tenant's and the old tenant's outputs", func() bool {
		return depth(t, h, "b", "out") == 1 && depth(t, h, "a", "out") == 2
	})
	if got := string(drainBodies(t, h, "b", "out")[0].Body); got != "v1:hello" {
		t.Errorf("b's output %q, want v1:hello", got)
	}
	st := get(t, srv.URL+"/v1/status", "b-secret", 200)
	if !strings.Contains(st, `"name": "b"`) || !strings.Contains(st, `"weight": 3`) || strings.Contains(st, `"name": "a"`) {
		t.Errorf("b's token does not see b (and only b):\n%s", st)
	}
	if s := bindingStatus(t, h, "a", "w"); s.Processed != 2 {
		t.Errorf("a processed %d, want 2 (its counters survive: not restarted)", s.Processed)
	}
	if seriesOf(t, h, "b") == 0 {
		t.Error("no metric series for the added tenant")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestHotReloadTenantRemoved: removing a tenant lets its in-flight messages finish and
// releases the rest (none lost, none invisible, none dead-lettered), then it is gone from
// status and metrics and its token is refused; the other tenant is untouched.
func TestHotReloadTenantRemoved(t *testing.T) {
	t.Setenv("TEST_WQ_A_TOKEN", "a-secret")
	t.Setenv("TEST_WQ_B_TOKEN", "b-secret")
	mod := abs(t, flakyWasm)
	a := "  a:\n    token_env: TEST_WQ_A_TOKEN\n" + tenantBinding(mod, "")
	b := "  b:\n    token_env: TEST_WQ_B_TOKEN\n" + tenantBinding(mod, ", pool: {max_instances: 2}, max_workers: 1")
	h, dir := reloadHost(t, a+b)
	h.debounce = time.Hour
	stop := run(t, h)
	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()
	aBefore := h.bindingNamed("a", "w")

	const sent = 8
	bodies := make([]string, sent)
	for i := range bodies {
		bodies[i] = "sleep:300"
	}
	send(t, h, "b", "in", bodies...)
	eventually(t, "b's messages in flight", func() bool { return bindingStatus(t, h, "b", "w").InFlight > 0 })
	get(t, srv.URL+"/v1/status", "b-secret", 200)

	writeConfig(t, dir, a)
	res, err := h.ReloadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tr, ok := tenantReloadOf(res, "b"); !ok || tr.Result != ReloadRemoved {
		t.Errorf("reload result tenants = %+v, want b removed", res.Tenants)
	}
	if !slices.ContainsFunc(res.Bindings, func(br BindingReload) bool {
		return br.Tenant == "b" && br.Binding == "w" && br.Result == ReloadRemoved
	}) {
		t.Errorf("reload result bindings %+v lack b/w removed", res.Bindings)
	}

	// The reload returned once b's binding stopped: what was in flight finished (its
	// output sent), the rest is back in the queue, visible at once.
	ctx := context.Background()
	out, in := rawQueue(t, h, "b", "out"), rawQueue(t, h, "b", "in")
	done := outDepth(t, out)
	if done == 0 {
		t.Error("no in-flight message of the removed tenant finished")
	}
	left, err := in.Receive(ctx, 32, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if done+int64(len(left)) != sent || outDepth(t, in) != int64(len(left)) {
		t.Errorf("after removal: %d outputs + %d visible inputs (depth %d), want %d in all", done, len(left), outDepth(t, in), sent)
	}
	if d := outDepth(t, rawQueue(t, h, "b", "in-poison")); d != 0 {
		t.Errorf("%d of b's messages dead-lettered by the removal", d)
	}

	for _, ts := range h.Status(ctx).Tenants {
		if ts.Name == "b" {
			t.Error("removed tenant still in status")
		}
	}
	get(t, srv.URL+"/v1/status", "b-secret", 401)
	do(t, "POST", srv.URL+"/v1/tenants/b/queues/in/notify", "b-secret", "", 401)
	get(t, srv.URL+"/v1/status", "a-secret", 200)
	if n := seriesOf(t, h, "b"); n != 0 {
		t.Errorf("%d metric series still labelled with the removed tenant", n)
	}
	if h.bindingNamed("a", "w") != aBefore {
		t.Error("removing a tenant restarted another tenant's binding")
	}
	send(t, h, "a", "in", "still here")
	eventually(t, "a's output after b's removal", func() bool { return depth(t, h, "a", "out") == 1 })

	// Removed for good: a later reload does not bring it back, nor serve its queue.
	if err := h.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if h.tenantNamed("b") != nil {
		t.Error("removed tenant back after another reload")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestHotReloadTenantSettingsChange: a changed limit rebuilds the tenant (its binding
// restarts on the new limit), a changed weight, cap or token applies in place; either way
// the other tenant's binding keeps running, and the change is observable. Only a changed
// memory limit moves the tenant to a new runtime, and then the old one is closed; no other
// change closes a runtime.
func TestHotReloadTenantSettingsChange(t *testing.T) {
	t.Setenv("TEST_WQ_A_TOKEN", "a-secret")
	t.Setenv("TEST_WQ_A_TOKEN_NEW", "a-rotated")
	t.Setenv("TEST_WQ_B_TOKEN", "b-secret")
	mod := abs(t, flakyWasm)
	type env struct {
		h   *Host
		url string
	}
	cases := []struct {
		name          string
		top, settings [2]string // before, after: top-level keys; tenant a's settings (indent 4)
		result        string    // tenant a's reload result
		changed       []string
		binding       string // extra settings of a's binding
		restarted     bool   // a's binding restarted
		newRuntime    bool   // a moved to a new runtime tenant, the old one closed
		check         func(t *testing.T, e env)
	}{{
		name:     "timeout rebuilds",
		settings: [2]string{"    limits: {timeout: 20s}\n", "    limits: {timeout: 150ms}\n"},
		result:   ReloadRebuilt, changed: []string{"limits.timeout"}, restarted: true,
		check: func(t *testing.T, e env) {
			send(t, e.h, "a", "in", "sleep:1000")
			eventually(t, "a call over the new time limit", func() bool {
				return bindingStatus(t, e.h, "a", "w").Pool.Timeouts > 0
			})
		},
	}, {
		name:     "memory rebuilds on a new runtime",
		settings: [2]string{"", "    limits: {memory: 16MiB}\n"},
		result:   ReloadRebuilt, changed: []string{"limits.memory"}, restarted: true, newRuntime: true,
		check: func(t *testing.T, e env) {
			rt := e.h.bindingNamed("a", "w").tenant.rt
			if got := rt.Limits().MemoryPages; got != 256 {
				t.Errorf("the rebuilt binding's runtime has %d pages, want 256 (16MiB)", got)
			}
			send(t, e.h, "a", "in", "on the new runtime")
			eventually(t, "a's output", func() bool { return depth(t, e.h, "a", "out") == 1 })
		},
	}, {
		name:     "max_message_bytes rebuilds",
		settings: [2]string{"", "    limits: {max_message_bytes: 8}\n"},
		result:   ReloadRebuilt, changed: []string{"limits.max_message_bytes"}, restarted: true,
		check: func(t *testing.T, e env) {
			send(t, e.h, "a", "in", "a message over eight bytes")
			eventually(t, "the long message dead-lettered", func() bool { return depth(t, e.h, "a", "in-poison") == 1 })
		},
	}, {
		name:     "cap applies in place",
		settings: [2]string{"    max_concurrency: 1\n", "    max_concurrency: 3\n"},
		result:   ReloadUpdated, changed: []string{"max_concurrency"},
		// Three workers: however the three messages are split between receives (they are
		// sent one at a time, and a loaded machine lets a poll fall between the sends),
		// they run at once; one worker would run a lone first message before the rest.
		binding: ", min_workers: 3",
		check: func(t *testing.T, e env) {
			send(t, e.h, "a", "in", "sleep:500", "sleep:500", "sleep:500")
			eventually(t, "3 calls at once under the raised cap", func() bool { return e.h.tenantNamed("a").limiter.Stats().Peak == 3 })
			if ts := tenantStatus(t, e.h, "a"); ts.MaxConcurrency != 3 {
				t.Errorf("status max_concurrency %d, want 3", ts.MaxConcurrency)
			}
		},
	}, {
		name:     "cap added rebuilds (a limiter is added)",
		settings: [2]string{"", "    max_concurrency: 1\n"},
		result:   ReloadRebuilt, changed: []string{"max_concurrency"}, restarted: true,
		check: func(t *testing.T, e env) {
			send(t, e.h, "a", "in", "sleep:200", "sleep:200", "sleep:200")
			eventually(t, "a's outputs", func() bool { return depth(t, e.h, "a", "out") == 3 })
			if p := e.h.tenantNamed("a").limiter.Stats().Peak; p != 1 {
				t.Errorf("peak calls %d under the new cap 1", p)
			}
		},
	}, {
		name:     "weight applies in place",
		settings: [2]string{"    weight: 1\n", "    weight: 7\n"},
		top:      [2]string{"max_concurrency: 8\n", "max_concurrency: 8\n"},
		result:   ReloadUpdated, changed: []string{"weight"},
		check: func(t *testing.T, e env) {
			if w := e.h.tenantNamed("a").limiter.Stats().Weight; w != 7 {
				t.Errorf("scheduler weight %d, want 7", w)
			}
			if ts := tenantStatus(t, e.h, "a"); ts.Weight != 7 {
				t.Errorf("status weight %d, want 7", ts.Weight)
			}
		},
	}, {
		name:   "host budget applies in place",
		top:    [2]string{"max_concurrency: 8\n", "max_concurrency: 2\n"},
		result: "",
		check: func(t *testing.T, e env) {
			if st := e.h.Status(context.Background()); st.MaxConcurrency != 2 {
				t.Errorf("status max_concurrency %d, want 2", st.MaxConcurrency)
			}
			send(t, e.h, "a", "in", "sleep:200", "sleep:200", "sleep:200")
			send(t, e.h, "b", "in", "sleep:200", "sleep:200", "sleep:200")
			peak := int64(0)
			eventually(t, "outputs under the new budget", func() bool {
				peak = max(peak, e.h.sched.Held())
				return depth(t, e.h, "a", "out") == 3 && depth(t, e.h, "b", "out") == 3
			})
			if peak > 2 {
				t.Errorf("%d calls held the host budget of 2 at once", peak)
			}
		},
	}, {
		name:     "token rotates in place",
		settings: [2]string{"    token_env: TEST_WQ_A_TOKEN\n", "    token_env: TEST_WQ_A_TOKEN_NEW\n"},
		result:   ReloadUpdated, changed: []string{"token_env"},
		check: func(t *testing.T, e env) {
			get(t, e.url+"/v1/status", "a-secret", 401)
			if st := get(t, e.url+"/v1/status", "a-rotated", 200); !strings.Contains(st, `"name": "a"`) {
				t.Errorf("the new token does not see its tenant:\n%s", st)
			}
			get(t, e.url+"/v1/status", "b-secret", 200)
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tenants := func(i int) string {
				return "  a:\n" + tc.settings[i] + tenantBinding(mod, ", pool: {max_instances: 4}"+tc.binding) +
					"  b:\n    token_env: TEST_WQ_B_TOKEN\n" + tenantBinding(mod, ", pool: {max_instances: 4}")
			}
			dir := t.TempDir()
			writeConfigTop(t, dir, tc.top[0], tenants(0))
			h := hostFromDir(t, dir)
			h.debounce = time.Hour
			stop := run(t, h)
			srv := httptest.NewServer(h.AdminHandler())
			defer srv.Close()
			aBefore, bBefore := h.bindingNamed("a", "w"), h.bindingNamed("b", "w")
			aRT, bRT := aBefore.tenant.rt, bBefore.tenant.rt
			var closed []*runtime.Tenant
			h.rtClosed = func(rt *runtime.Tenant) { closed = append(closed, rt) }

			writeConfigTop(t, dir, tc.top[1], tenants(1))
			res, err := h.ReloadAll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			tr, ok := tenantReloadOf(res, "a")
			if tc.result == "" && ok {
				t.Errorf("tenant a reported %+v; want nothing", tr)
			}
			if tc.result != "" && (tr.Result != tc.result || !slices.Equal(tr.Changed, tc.changed)) {
				t.Errorf("tenant a reported %+v; want %s of %v", tr, tc.result, tc.changed)
			}
			if _, ok := tenantReloadOf(res, "b"); ok {
				t.Errorf("the untouched tenant b reported: %+v", res.Tenants)
			}
			if restarted := h.bindingNamed("a", "w") != aBefore; restarted != tc.restarted {
				t.Errorf("a's binding restarted: %v, want %v", restarted, tc.restarted)
			}
			if h.bindingNamed("b", "w") != bBefore || h.tenantNamed("b").rt != bRT {
				t.Error("the other tenant's binding was restarted or its runtime replaced")
			}
			if newRT := h.tenantNamed("a").rt; (newRT != aRT) != tc.newRuntime || h.bindingNamed("a", "w").tenant.rt != newRT {
				t.Errorf("a's runtime replaced: %v, want %v (and its binding on it)", newRT != aRT, tc.newRuntime)
			}
			if wantClosed := []*runtime.Tenant{aRT}; tc.newRuntime && !slices.Equal(closed, wantClosed) {
				t.Errorf("runtimes closed: %v, want a's old one only (%p)", closed, aRT)
			} else if !tc.newRuntime && len(closed) != 0 {
				t.Errorf("runtimes closed by a change that kept them: %v", closed)
			}
			if !reflect.DeepEqual(*h.tenantNamed("a").conf(), h.Config().Tenants["a"]) {
				t.Error("the tenant's config in force is not the reloaded one")
			}
			tc.check(t, env{h: h, url: srv.URL})
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHotReloadTenantMemoryLimit: a lowered limits.memory applies to the rebuilt binding (a
// guest growing its memory past it fails with the memory-limit error and is dead-lettered,
// where the same messages fitted the old limit); a removed tenant's runtime is closed (the
// engine makes a fresh one for its name); re-adding the tenant with yet another memory
// limit works and applies it. The other tenant's binding and runtime are untouched
// throughout.
func TestHotReloadTenantMemoryLimit(t *testing.T) {
	guest := abs(t, "../runtime/testdata/guest/guest.wasm")
	// One instance keeps what each grow:4 allocates, so eight messages grow it by 32MiB: the
	// runtime reports a failed grow as the memory limit only near the limit.
	a := func(settings string) string {
		return "  a:\n" + settings + tenantBinding(guest, ", max_workers: 1, max_dequeue_count: 1, pool: {max_instances: 1}")
	}
	b := "  b:\n" + tenantBinding(abs(t, flakyWasm), "")
	h, dir := reloadHost(t, a("")+b)
	h.debounce = time.Hour
	stop := run(t, h)
	ctx := context.Background()
	var closed []*runtime.Tenant
	h.rtClosed = func(rt *runtime.Tenant) { closed = append(closed, rt) }
	bBefore := h.bindingNamed("b", "w")
	bRT := bBefore.tenant.rt
	reload := func(tenants, result string) {
		t.Helper()
		writeConfig(t, dir, tenants)
		res, err := h.ReloadAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tr, ok := tenantReloadOf(res, "a"); !ok || tr.Result != result {
			t.Fatalf("reload result tenants = %+v, want a %s", res.Tenants, result)
		}
		if h.bindingNamed("b", "w") != bBefore || h.tenantNamed("b").rt != bRT || slices.Contains(closed, bRT) {
			t.Fatal("the other tenant's binding restarted or its runtime replaced or closed")
		}
	}
	// grow sends n grow:4 messages to a and returns those dead-lettered, once all are settled.
	grow := func(n int) []*queue.Message {
		t.Helper()
		bodies := make([]string, n)
		for i := range bodies {
			bodies[i] = "grow:4"
		}
		before := bindingStatus(t, h, "a", "w").Processed
		send(t, h, "a", "in", bodies...)
		eventually(t, "a's grow messages settled", func() bool {
			return bindingStatus(t, h, "a", "w").Processed-before+uint64(depth(t, h, "a", "in-poison")) == uint64(n)
		})
		return drainBodies(t, h, "a", "in-poison")
	}
	if dead := grow(8); len(dead) != 0 {
		t.Fatalf("%d grow messages dead-lettered under the default 128MiB", len(dead))
	}
	rt128 := h.tenantNamed("a").rt

	reload(a("    limits: {memory: 24MiB}\n")+b, ReloadRebuilt)
	rt24 := h.tenantNamed("a").rt
	if rt24 == rt128 || rt24.Limits().MemoryPages != 384 || h.bindingNamed("a", "w").tenant.rt != rt24 {
		t.Fatalf("a's runtime after the memory change: %p with %+v, want a new one with 384 pages", rt24, rt24.Limits())
	}
	if !slices.Equal(closed, []*runtime.Tenant{rt128}) {
		t.Errorf("runtimes closed %v, want a's old one (%p)", closed, rt128)
	}
	dead := grow(8)
	if len(dead) == 0 {
		t.Fatal("no grow message failed under the lowered limit of 24MiB")
	}
	for _, m := range dead {
		if r := m.Attributes[queue.AttrReason]; !strings.Contains(r, runtime.ErrMemoryLimit.Error()) {
			t.Errorf("dead-lettered for %q; want the memory-limit error", r)
		}
	}

	reload(b, ReloadRemoved)
	if !slices.Equal(closed, []*runtime.Tenant{rt128, rt24}) {
		t.Errorf("runtimes closed %v, want the removed tenant's (%p) too", closed, rt24)
	}
	if fresh, err := h.engine.Tenant("a", runtime.TenantLimits{}); err != nil || fresh == rt24 {
		t.Errorf("the engine still holds the removed tenant's runtime (%v)", err)
	} else {
		_ = fresh.Close(ctx) // made by this check only
	}

	reload(a("    limits: {memory: 64MiB}\n")+b, ReloadAdded)
	rt64 := h.tenantNamed("a").rt
	if rt64 == rt24 || rt64.Limits().MemoryPages != 1024 {
		t.Fatalf("re-added a's runtime: %p with %+v, want a new one with 1024 pages", rt64, rt64.Limits())
	}
	if dead := grow(4); len(dead) != 0 {
		t.Errorf("%d grow messages dead-lettered under the re-added tenant's 64MiB", len(dead))
	}
	if len(closed) != 2 {
		t.Errorf("runtimes closed by the re-add: %v", closed[2:])
	}
	send(t, h, "b", "in", "b still serves")
	eventually(t, "b's output", func() bool { return depth(t, h, "b", "out") == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestHotReloadTenantStuckKeepsRuntime: a removed tenant whose binding does not stop within
// the reload's deadline keeps its runtime open (its call in flight finishes on it and sends
// its output), and re-adding the tenant gets a fresh runtime, which a later removal closes
// without touching the one still pinned.
func TestHotReloadTenantStuckKeepsRuntime(t *testing.T) {
	mod := abs(t, flakyWasm)
	a := "  a:\n" + tenantBinding(mod, "")
	b := "  b:\n" + tenantBinding(mod, ", pool: {max_instances: 1}, max_workers: 1")
	h, dir := reloadHost(t, a+b)
	h.debounce = time.Hour
	stop := run(t, h)
	var closed []*runtime.Tenant
	h.rtClosed = func(rt *runtime.Tenant) { closed = append(closed, rt) }
	aBefore, stuckRT := h.bindingNamed("a", "w"), h.tenantNamed("b").rt

	send(t, h, "b", "in", "sleep:1500")
	eventually(t, "b's call in flight", func() bool { return bindingStatus(t, h, "b", "w").InFlight > 0 })
	writeConfig(t, dir, a)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	res, err := h.ReloadAll(ctx)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "tenants.b.bindings.w: stopping") {
		t.Fatalf("reload error %v; want b's binding failing to stop in time", err)
	}
	if tr, ok := tenantReloadOf(res, "b"); !ok || tr.Result != ReloadRemoved || tr.Error == "" {
		t.Errorf("reload result tenants = %+v, want b removed with a stopping error", res.Tenants)
	}
	if len(closed) != 0 || !h.pinned[stuckRT] {
		t.Fatalf("runtimes closed %v, pinned %v: the stuck binding's runtime must stay open", closed, h.pinned[stuckRT])
	}
	eventually(t, "the stuck call's output", func() bool { return outDepth(t, rawQueue(t, h, "b", "out")) == 1 })

	writeConfig(t, dir, a+b)
	if _, err := h.ReloadAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	readded := h.tenantNamed("b").rt
	if readded == stuckRT {
		t.Fatal("the re-added tenant runs on the pinned runtime of the stuck one")
	}
	send(t, h, "b", "in", "back")
	eventually(t, "the re-added tenant's output", func() bool { return depth(t, h, "b", "out") == 2 })
	writeConfig(t, dir, a)
	if _, err := h.ReloadAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(closed, []*runtime.Tenant{readded}) {
		t.Errorf("runtimes closed %v, want only the re-added tenant's (%p)", closed, readded)
	}
	if h.bindingNamed("a", "w") != aBefore {
		t.Error("the other tenant's binding was restarted")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
