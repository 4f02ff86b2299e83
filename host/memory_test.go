package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/runtime"
)

// tenantMemory is tenant name's memory budget as /v1/status reports it.
func tenantMemory(t *testing.T, h *Host, name string) runtime.BudgetUsage {
	t.Helper()
	for _, ts := range h.Status(context.Background()).Tenants {
		if ts.Name == name {
			return ts.Memory
		}
	}
	t.Fatalf("no tenant %s in /v1/status", name)
	return runtime.BudgetUsage{}
}

// TestBudgetSharesFollowTenants: with memory_budget set, each tenant without its own
// limits.memory_budget gets its weight's share of what the others leave, in /v1/status
// and /metrics; a reload that adds a tenant moves the shares in place, restarting no
// binding.
func TestBudgetSharesFollowTenants(t *testing.T) {
	mod := abs(t, "testdata/versioned/v1.wasm")
	tenant := func(name, extra string) string {
		return "  " + name + ":\n" + extra + "    bindings:\n      w: {backend: mem, queue: in, module: " + mod + "}\n"
	}
	dir := t.TempDir()
	top := "memory_budget: 400MiB\n"
	writeConfigTop(t, dir, top, tenant("a", "")+tenant("b", "    weight: 3\n")+tenant("x", "    limits: {memory_budget: 80MiB}\n"))
	h := hostFromDir(t, dir)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	st := h.Status(context.Background())
	if st.Memory == nil || st.Memory.Limit != 400<<20 || st.Memory.LimitSource != "memory_budget" {
		t.Fatalf("host memory = %+v; want a 400 MiB budget from memory_budget", st.Memory)
	}
	for name, want := range map[string]int64{"a": 80 << 20, "b": 240 << 20, "x": 80 << 20} {
		if got := tenantMemory(t, h, name).Limit; got != want {
			t.Errorf("tenant %s budget = %d; want %d", name, got, want)
		}
	}
	if got := tenantMemory(t, h, "a").ByConsumer["modules"]; got <= 0 {
		t.Errorf("tenant a reserves %d bytes for its module; want its size at least", got)
	}
	if _, v, ok := series(t, h, "", "wqhost_tenant_memory_budget_bytes", map[string]string{"tenant": "b"}); !ok || v != 240<<20 {
		t.Errorf("wqhost_tenant_memory_budget_bytes{tenant=b} = %v (found %v); want %d", v, ok, 240<<20)
	}
	if _, v, ok := series(t, h, "", "wqhost_memory_budget_bytes", nil); !ok || v != 400<<20 {
		t.Errorf("wqhost_memory_budget_bytes = %v (found %v); want %d", v, ok, 400<<20)
	}

	aBefore := h.bindingNamed("a", "w0")
	writeConfigTop(t, dir, top, tenant("a", "")+tenant("b", "    weight: 3\n")+tenant("x", "    limits: {memory_budget: 80MiB}\n")+tenant("c", "    weight: 4\n"))
	if err := h.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"a": 40 << 20, "b": 120 << 20, "c": 160 << 20, "x": 80 << 20} {
		if got := tenantMemory(t, h, name).Limit; got != want {
			t.Errorf("after adding c: tenant %s budget = %d; want %d", name, got, want)
		}
	}
	if h.bindingNamed("a", "w0") != aBefore {
		t.Error("a share moved by another tenant's arrival restarted tenant a's binding")
	}
}

// TestBudgetRefusesModuleLoad: a module version whose load does not fit its tenant's
// memory budget is refused with an error naming the budget, the tenant and the module; on a
// hot swap the old version keeps serving.
func TestBudgetRefusesModuleLoad(t *testing.T) {
	small, big := abs(t, "testdata/versioned/v1.wasm"), abs(t, "../examples/handlers/echo-go/echo-go.wasm")
	conf := func(mods ...string) string {
		s := "  a:\n    limits: {memory_budget: 4MiB}\n    bindings:\n"
		for i, mod := range mods {
			s += fmt.Sprintf("      w%d: {backend: mem, queue: in%d, module: %s}\n", i, i, mod)
		}
		return s
	}
	// Two standard-Go modules (2.1 and 2.2 MB) do not fit 4 MiB together.
	_, err := New(context.Background(), hostConfig(t, "backends:\n  mem: {type: memory}\n", conf(big, abs(t, "../examples/handlers/noop-go/noop-go.wasm"))), testLogger(t))
	if !errors.Is(err, runtime.ErrMemoryBudget) || !strings.Contains(err.Error(), "tenant a memory budget") ||
		!strings.Contains(err.Error(), "echo-go.wasm") && !strings.Contains(err.Error(), "noop-go.wasm") {
		t.Fatalf("New = %v; want the tenant's memory budget refusing a module, named", err)
	}

	dir := t.TempDir()
	handler := filepath.Join(dir, "handler.wasm")
	b, err := os.ReadFile(small)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(handler, b, 0o644); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, dir, conf(handler))
	h := hostFromDir(t, dir)
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	before := h.bindingNamed("a", "w0").cur.Load().module.Digest()
	b, err = os.ReadFile(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(handler, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := h.ReloadAll(context.Background())
	if err == nil || !strings.Contains(err.Error(), "memory budget exhausted: tenant a memory budget") {
		t.Fatalf("reload to a module past the budget = %+v, %v; want the tenant's memory budget refusing it", res, err)
	}
	if got := h.bindingNamed("a", "w0").cur.Load().module.Digest(); got != before {
		t.Errorf("the binding serves %s after a refused swap; want the old version %s", got, before)
	}
}

// TestBudgetMessageBodies: the body a call runs on is held from the tenant's memory budget
// while the call runs; a body that does not fit fails the message, to be retried, with the
// budget's reason, and the handler is not called; nothing stays held.
func TestBudgetMessageBodies(t *testing.T) {
	h, _ := newHostWith(t, "backends:\n  mem: {type: memory}\n",
		"  a:\n    bindings:\n      w: {backend: mem, queue: in, output: out, module: "+abs(t, "testdata/versioned/v1.wasm")+"}\n")
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	b := h.bindingNamed("a", "w")
	rt := b.tenant.rt
	body := bytes.Repeat([]byte("b"), 512<<10)
	if o := b.Handle(context.Background(), &queue.Message{ID: "m1", Body: body}); o.Kind != outcome.KindDone {
		t.Fatalf("with room: outcome %v (%v); want done", o.Kind, o.Reason())
	}
	if got := rt.MemoryBudget().ByConsumer["messages"]; got != 0 {
		t.Errorf("after a settled call, messages hold %d bytes; want 0", got)
	}
	calls := b.cur.Load().pool.Stats().Calls
	rt.SetMemoryBudget(rt.MemoryBudget().Reserved + 256<<10)
	o := b.Handle(context.Background(), &queue.Message{ID: "m2", Body: body})
	if o.Kind != outcome.KindFailed || o.Cause != outcome.CauseBudgetRefused || !errors.Is(o.Err, runtime.ErrMemoryBudget) ||
		!strings.Contains(o.Reason(), "binding w: message bodies asked for 524288 bytes of messages") {
		t.Fatalf("past the budget: outcome %v (%q); want failed naming the binding's message bodies", o.Kind, o.Reason())
	}
	if got := b.cur.Load().pool.Stats().Calls; got != calls {
		t.Errorf("the handler ran %d times on a body the budget refused; want 0", got-calls)
	}
	if got := rt.MemoryBudget().ByConsumer["messages"]; got != 0 {
		t.Errorf("after a refusal, messages hold %d bytes; want 0", got)
	}
}

// TestBudgetStatusScopedToToken: the host's token sees the host's memory budget and every
// tenant's; a tenant's token sees its own budget and not the host's, which sums every
// tenant's use.
func TestBudgetStatusScopedToToken(t *testing.T) {
	u := twoTenantAdmin(t, "")
	for _, tc := range []struct {
		token   string
		host    bool
		tenants []string
	}{
		{"host-secret", true, []string{"acme", "beta"}},
		{"acme-secret", false, []string{"acme"}},
	} {
		req, _ := http.NewRequest("GET", u+"/v1/status", nil)
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: /v1/status %d, %v", tc.token, resp.StatusCode, err)
		}
		if _, ok := st["memory"]; ok != tc.host {
			t.Errorf("%s: host memory in /v1/status = %v; want %v", tc.token, ok, tc.host)
		}
		var names []string
		for _, ts := range st["tenants"].([]any) {
			tm := ts.(map[string]any)
			names = append(names, tm["name"].(string))
			if _, ok := tm["memory"].(map[string]any)["limit_bytes"]; !ok {
				t.Errorf("%s: tenant %v has no memory budget in /v1/status", tc.token, tm["name"])
			}
		}
		if strings.Join(names, ",") != strings.Join(tc.tenants, ",") {
			t.Errorf("%s: tenants %v; want %v", tc.token, names, tc.tenants)
		}
	}
}

// TestHostHeld: the host's own share is its heap less what reservations hold there; what
// reserves outside the Go heap (guest memory, machine code, compile children) and the
// share's own previous value do not count.
func TestHostHeld(t *testing.T) {
	for _, tc := range []struct {
		name string
		heap int64
		by   map[string]int64
		want int64
	}{
		{"nothing reserved", 150 << 20, nil, 150 << 20},
		{"bodies and stacks on the heap", 400 << 20, map[string]int64{"messages": 50 << 20, "stacks": 200 << 20}, 150 << 20},
		{"reservations outside the heap", 150 << 20, map[string]int64{"instances": 300 << 20, "modules": 20 << 20, "compile": 400 << 20}, 150 << 20},
		{"its own last value", 150 << 20, map[string]int64{"host": 140 << 20}, 150 << 20},
		{"stacks reserved ahead of their growth", 100 << 20, map[string]int64{"stacks": 200 << 20}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hostHeld(runtime.BudgetUsage{ByConsumer: tc.by}, tc.heap); got != tc.want {
				t.Errorf("hostHeld = %d MiB, want %d MiB", got>>20, tc.want>>20)
			}
		})
	}
}
