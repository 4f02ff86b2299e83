package host

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/runtime"
)

func tenantStatus(t *testing.T, h *Host, name string) TenantStatus {
	t.Helper()
	for _, ts := range h.Status(context.Background()).Tenants {
		if ts.Name == name {
			return ts
		}
	}
	t.Fatalf("no status for tenant %s", name)
	return TenantStatus{}
}

// TestHotReloadTenantBadConfigChangesNothing: a reload whose tenants fail to build or
// validate changes nothing (not even the tenants that would have built) and names the key.
// The runtimes it built for the tenants it would have added or moved to a new memory limit
// are closed; the serving tenant's runtime is not.
func TestHotReloadTenantBadConfigChangesNothing(t *testing.T) {
	t.Setenv("TEST_WQ_A_TOKEN", "a-secret")
	t.Setenv("TEST_WQ_C_TOKEN", "a-secret")
	a := func(settings string) string {
		return "  a:\n    token_env: TEST_WQ_A_TOKEN\n" + settings + tenantBinding("handler.wasm", "")
	}
	h, dir := reloadHost(t, a(""))
	h.debounce = time.Hour
	stop := run(t, h)
	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()
	if err := os.WriteFile(filepath.Join(dir, "bad.wasm"), []byte("\x00asm\x01\x00\x00\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	aBefore, tBefore, cfgBefore := h.bindingNamed("a", "w"), h.tenantNamed("a"), h.Config()
	for _, tc := range []struct {
		name, tenants, want string
		built               int // runtimes built for the refused reload (c's, a new one for a)
	}{
		{"added tenant's module fails", a("") + "  c:\n" + tenantBinding("bad.wasm", ""), "tenants.c.bindings.w", 1},
		{"rebuild and a failing tenant", a("    limits: {timeout: 5s}\n") + "  c:\n" + tenantBinding("bad.wasm", ""), "tenants.c.bindings.w", 1},
		{"invalid limit", a("    limits: {timeout: -1s}\n"), "tenants.a.limits.timeout", 0},
		{"invalid weight", a("    weight: 0\n"), "tenants.a.weight", 0},
		{"memory change and a failing tenant", a("    limits: {memory: 64MiB}\n") + "  c:\n" + tenantBinding("bad.wasm", ""), "tenants.c.bindings.w", 2},
		{"unset token variable", a("") + "  c:\n    token_env: TEST_WQ_UNSET_TOKEN\n" + tenantBinding("handler.wasm", ""), "tenants.c.token_env", 1},
		{"token equal to another tenant's", a("") + "  c:\n    token_env: TEST_WQ_C_TOKEN\n" + tenantBinding("handler.wasm", ""), "tenants.c.token_env: the token in TEST_WQ_C_TOKEN equals the one tenants.a.token_env names", 1},
		{"token variable another tenant names", a("") + "  c:\n    token_env: TEST_WQ_A_TOKEN\n" + tenantBinding("handler.wasm", ""), "tenants.c.token_env: names TEST_WQ_A_TOKEN, as tenants.a.token_env does", 0},
		{"tenant removed and module fails", "  c:\n" + tenantBinding("bad.wasm", ""), "tenants.c.bindings.w", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var closed []*runtime.Tenant
			h.rtClosed = func(rt *runtime.Tenant) { closed = append(closed, rt) }
			defer func() { h.rtClosed = nil }()
			writeConfig(t, dir, tc.tenants)
			res, err := h.ReloadAll(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "running config stays") {
				t.Fatalf("reload error %v; want one naming %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "a-secret") {
				t.Errorf("reload error shows a token: %v", err)
			}
			if res.Config != "failed" || len(res.Tenants) != 0 {
				t.Errorf("result config %q, tenants %+v; want failed and none", res.Config, res.Tenants)
			}
			if h.bindingNamed("a", "w") != aBefore || h.tenantNamed("a") != tBefore || h.tenantNamed("c") != nil || len(h.bindings()) != 1 {
				t.Error("a refused reload changed the tenants or bindings")
			}
			if h.Config() != cfgBefore {
				t.Error("a refused reload replaced the config in force")
			}
			if slices.Contains(closed, tBefore.rt) || len(closed) != tc.built {
				t.Errorf("runtimes closed %v (serving: %p); want the %d built for the refused reload", closed, tBefore.rt, tc.built)
			}
			get(t, srv.URL+"/v1/status", "a-secret", 200)
		})
	}
	writeConfig(t, dir, a(""))
	send(t, h, "a", "in", "ok")
	eventually(t, "a's output", func() bool { return depth(t, h, "a", "out") == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
