package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMetricsReloadFailures: a config file that fails to load sets
// wqhost_config_last_reload_successful to 0 (the host keeps its config) and keeps the
// success timestamp; a good one sets 1 and moves the timestamp. A binding whose module
// fails to reload is served as wqhost_module_reload_failed 1 until a reload succeeds, and
// is absent while healthy.
func TestMetricsReloadFailures(t *testing.T) {
	h, dir := reloadHost(t, "  a:\n"+tenantBinding("handler.wasm", ""))
	h.debounce = time.Hour
	stop := run(t, h)
	defer func() { _ = stop() }()
	gauge := func(name string, labels map[string]string) (float64, bool) {
		_, v, found := series(t, h, "", name, labels)
		return v, found
	}
	ok, found := gauge("wqhost_config_last_reload_successful", nil)
	if !found || ok != 1 {
		t.Fatalf("at start wqhost_config_last_reload_successful = %v (found %v), want 1", ok, found)
	}
	startAt, _ := gauge("wqhost_config_last_reload_success_timestamp_seconds", nil)
	if startAt < float64(h.started.Unix()) {
		t.Errorf("success timestamp %v before the host's start %v", startAt, h.started.Unix())
	}

	if err := os.WriteFile(filepath.Join(dir, "wqhost.yaml"), []byte("tenants: [not, a, map\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReloadAll(context.Background()); err == nil {
		t.Fatal("a broken config file reloaded")
	}
	if ok, _ := gauge("wqhost_config_last_reload_successful", nil); ok != 0 {
		t.Errorf("after a failed reload wqhost_config_last_reload_successful = %v, want 0", ok)
	}
	if at, _ := gauge("wqhost_config_last_reload_success_timestamp_seconds", nil); at != startAt {
		t.Errorf("a failed reload moved the success timestamp %v -> %v", startAt, at)
	}

	time.Sleep(10 * time.Millisecond) // the next success's timestamp must be later
	writeConfig(t, dir, "  a:\n"+tenantBinding("handler.wasm", ""))
	if _, err := h.ReloadAll(context.Background()); err != nil {
		t.Fatalf("good config: %v", err)
	}
	if ok, _ := gauge("wqhost_config_last_reload_successful", nil); ok != 1 {
		t.Errorf("after a good reload wqhost_config_last_reload_successful = %v, want 1", ok)
	}
	if at, _ := gauge("wqhost_config_last_reload_success_timestamp_seconds", nil); at <= startAt {
		t.Errorf("a good reload left the success timestamp at %v (start %v)", at, startAt)
	}

	ab := map[string]string{"tenant": "a", "binding": "w"}
	if _, found := gauge("wqhost_module_reload_failed", ab); found {
		t.Errorf("wqhost_module_reload_failed served for a healthy binding")
	}
	if err := os.WriteFile(filepath.Join(dir, "handler.wasm"), []byte("\x00asm\x01\x00\x00\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReloadAll(context.Background()); err == nil {
		t.Fatal("a broken module reloaded")
	}
	if v, found := gauge("wqhost_module_reload_failed", ab); !found || v != 1 {
		t.Errorf("after a refused module wqhost_module_reload_failed{a/w} = %v (found %v), want 1", v, found)
	}
	if err := os.WriteFile(filepath.Join(dir, "handler.wasm"), readFixture(t, "v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReloadAll(context.Background()); err != nil {
		t.Fatalf("good module: %v", err)
	}
	if _, found := gauge("wqhost_module_reload_failed", ab); found {
		t.Errorf("wqhost_module_reload_failed still served after the module reloaded")
	}
}

// TestConfigReloadErrorForTenant: a tenant's token reads that the config reload failed,
// not the error, which names other tenants' keys; the host's token reads the error.
func TestConfigReloadErrorForTenant(t *testing.T) {
	h, dir := reloadHost(t, "  a:\n"+tenantBinding("handler.wasm", "")+"  secretive:\n"+tenantBinding("handler.wasm", ""))
	defer func() { _ = h.Close(context.Background()) }()
	writeConfig(t, dir, "  a:\n"+tenantBinding("handler.wasm", "")+"  secretive:\n    weight: 0\n"+tenantBinding("handler.wasm", ""))
	if _, err := h.ReloadAll(context.Background()); err == nil {
		t.Fatal("a bad weight reloaded")
	}
	if st := h.StatusPage(context.Background(), StatusQuery{Tenant: "a", ForTenant: true}); st.LastConfigReloadError != ConfigReloadFailedForTenant || st.LastConfigReloadErrorAt == nil {
		t.Errorf("tenant a reads last_config_reload_error %q", st.LastConfigReloadError)
	}
	if st := h.Status(context.Background()); !strings.Contains(st.LastConfigReloadError, "tenants.secretive.weight") {
		t.Errorf("the host reads last_config_reload_error %q, want the key named", st.LastConfigReloadError)
	}
}
