package host

// Helpers only the tests use, kept out of the host's build.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wqhost/wqhost/host/config"
)

func (h *Host) bindingNamed(tenant, name string) *binding {
	for _, b := range h.bindings() {
		if b.tenant.name == tenant && b.name == name {
			return b
		}
	}
	return nil
}

// ListDeadLetters returns up to limit (0 = all) dead letters of tenant's queue (its
// <queue>-poison), repeats of one original message as one entry (DeadLetter.Repeats),
// bodies above ListBodyBytes left out. It holds what it returns: use WalkDeadLetters to
// stream a large queue.
func ListDeadLetters(ctx context.Context, cfg *config.Config, tenant, queue string, limit int) ([]DeadLetter, error) {
	var out []DeadLetter
	byOriginal := map[string]int{} // original id -> index in out
	_, err := WalkDeadLetters(ctx, cfg, tenant, queue, ListOptions{Limit: limit}, func(d DeadLetter) error {
		if d.Repeats < 0 {
			out[byOriginal[d.OriginalID]].Repeats++
			return nil
		}
		if d.OriginalID != "" {
			byOriginal[d.OriginalID] = len(out)
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// twoTenantAdmin builds, without running its listeners, a host of two tenants, acme and
// beta, each with one binding on its queue in and its own admin token (acme-secret,
// beta-secret; the host's is host-secret), and returns the address of its admin API, whose
// config is admin with adminExtra appended; host and server are closed when the test ends.
func twoTenantAdmin(t *testing.T, adminExtra string) string {
	t.Helper()
	t.Setenv("TEST_WQ_HOST_TOKEN", "host-secret")
	t.Setenv("TEST_WQ_ACME_TOKEN", "acme-secret")
	t.Setenv("TEST_WQ_BETA_TOKEN", "beta-secret")
	dir := t.TempDir()
	mod := abs(t, flakyWasm)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
data_dir: %s
cache_dir: %s
admin: {addr: "127.0.0.1:0", token_env: TEST_WQ_HOST_TOKEN%s}
tenants:
  acme:
    token_env: TEST_WQ_ACME_TOKEN
    bindings:
      a: {queue: in, module: %q}
  beta:
    token_env: TEST_WQ_BETA_TOKEN
    bindings:
      b: {queue: in, module: %q}
`, filepath.Join(dir, "data"), cacheDir, adminExtra, mod, mod)), dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	srv := httptest.NewServer(h.AdminHandler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// buildLatencyScaler builds the example scaler plugin into a temporary directory and
// returns the binary's path; it skips the test in -short.
func buildLatencyScaler(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a plugin binary")
	}
	bin := filepath.Join(t.TempDir(), "latency-scaler")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/policies/latency-scaler").CombinedOutput(); err != nil {
		t.Fatalf("build plugin: %v\n%s", err, out)
	}
	return bin
}
