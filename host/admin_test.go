package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
)

func get(t *testing.T, url, token string, want int) string {
	t.Helper()
	return do(t, http.MethodGet, url, token, "", want)
}

func do(t *testing.T, method, url, token, body string, want int) string {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Errorf("%s %s = %d, want %d: %s", method, url, resp.StatusCode, want, b)
	}
	return string(b)
}

func TestAdminAuth(t *testing.T) {
	u := twoTenantAdmin(t, ", max_body_bytes: 1KiB")
	cases := []struct {
		name, method, path, token string
		want                      int
	}{
		{"healthz needs no token", "GET", "/healthz", "", 200},
		{"readyz needs no token", "GET", "/readyz", "", 200},
		{"status without token", "GET", "/v1/status", "", 401},
		{"status with a bad token", "GET", "/v1/status", "nope", 401},
		{"metrics without token", "GET", "/metrics", "", 401},
		{"status with host token", "GET", "/v1/status", "host-secret", 200},
		{"status with tenant token", "GET", "/v1/status", "acme-secret", 200},
		{"status of its own tenant", "GET", "/v1/status?tenant=acme&limit=1", "acme-secret", 200},
		{"status of another tenant", "GET", "/v1/status?tenant=beta", "acme-secret", 403},
		{"host status of one tenant", "GET", "/v1/status?tenant=beta", "host-secret", 200},
		{"notify own queue", "POST", "/v1/tenants/acme/queues/in/notify", "acme-secret", 200},
		{"notify another tenant's queue", "POST", "/v1/tenants/beta/queues/in/notify", "acme-secret", 403},
		{"host notifies any tenant", "POST", "/v1/tenants/beta/queues/in/notify", "host-secret", 200},
		{"notify unknown queue", "POST", "/v1/tenants/acme/queues/nope/notify", "acme-secret", 404},
		{"notify unknown tenant", "POST", "/v1/tenants/ghost/queues/in/notify", "host-secret", 404},
		{"notify without token", "POST", "/v1/tenants/acme/queues/in/notify", "", 401},
		{"reload by a tenant", "POST", "/v1/reload", "acme-secret", 403},
		{"reload by the host", "POST", "/v1/reload", "host-secret", 200},
		{"wrong method", "GET", "/v1/reload", "host-secret", 405},
		{"binding detail of its own tenant", "GET", "/v1/tenants/acme/bindings/a", "acme-secret", 200},
		{"binding detail of another tenant", "GET", "/v1/tenants/beta/bindings/b", "acme-secret", 403},
		{"unknown binding", "GET", "/v1/tenants/acme/bindings/zz", "acme-secret", 404},
		{"rollback of another tenant's binding", "POST", "/v1/tenants/beta/bindings/b/rollback", "acme-secret", 403},
		{"rollback with no previous version", "POST", "/v1/tenants/acme/bindings/a/rollback", "acme-secret", 409},
		{"console without a session", "GET", "/console/events", "", 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { do(t, c.method, u+c.path, c.token, "", c.want) })
	}

	// A tenant token sees only its own tenant, in status and metrics.
	st := get(t, u+"/v1/status", "acme-secret", 200)
	if !strings.Contains(st, `"name": "acme"`) || strings.Contains(st, `"name": "beta"`) {
		t.Errorf("acme's status shows other tenants:\n%s", st)
	}
	m := get(t, u+"/metrics", "beta-secret", 200)
	if !strings.Contains(m, `tenant="beta"`) || strings.Contains(m, `tenant="acme"`) {
		t.Errorf("beta's metrics show other tenants")
	}
	all := get(t, u+"/v1/status", "host-secret", 200)
	if !strings.Contains(all, `"name": "acme"`) || !strings.Contains(all, `"name": "beta"`) {
		t.Errorf("host status lacks a tenant")
	}
	// Bodies are size-limited.
	do(t, "POST", u+"/v1/tenants/acme/queues/in/notify", "acme-secret", strings.Repeat("x", 2048), http.StatusRequestEntityTooLarge)
}

// TestDuplicateTokensRefusedAtStart: a host whose admin tokens are not all distinct (a
// tenant's equal to the host's, or two tenants') does not start; the error names both keys
// of each pair and never the value.
func TestDuplicateTokensRefusedAtStart(t *testing.T) {
	t.Setenv("TEST_WQ_HOST_TOKEN", "same-secret")
	t.Setenv("TEST_WQ_ACME_TOKEN", "same-secret")
	t.Setenv("TEST_WQ_BETA_TOKEN", "same-secret")
	dir := t.TempDir()
	mod := abs(t, flakyWasm)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
data_dir: %s
cache_dir: %s
admin: {addr: "off", token_env: TEST_WQ_HOST_TOKEN}
tenants:
  acme:
    token_env: TEST_WQ_ACME_TOKEN
    bindings:
      a: {queue: in, module: %q}
  beta:
    token_env: TEST_WQ_BETA_TOKEN
    bindings:
      b: {queue: in, module: %q}
`, filepath.Join(dir, "data"), cacheDir, mod, mod)), dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), cfg, testLogger(t))
	if err == nil {
		h.Close(context.Background())
		t.Fatal("a host with one token for three principals started")
	}
	if !errors.Is(err, ErrDuplicateToken) {
		t.Errorf("error %v is not ErrDuplicateToken", err)
	}
	for _, want := range []string{
		"tenants.acme.token_env: the token in TEST_WQ_ACME_TOKEN equals the one admin.token_env names",
		"tenants.beta.token_env: the token in TEST_WQ_BETA_TOKEN equals the one admin.token_env names",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "same-secret") {
		t.Errorf("the error shows the token: %v", err)
	}
}

func TestReadyzFollowsLifecycle(t *testing.T) {
	h, _ := newHost(t, fmt.Sprintf("  default:\n    bindings:\n      b: {queue: in, module: %q}\n", abs(t, flakyWasm)))
	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()
	get(t, srv.URL+"/readyz", "", 200)
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	get(t, srv.URL+"/readyz", "", 503)
}

// TestReadyzFalseWhileDraining: once Run's context ends (SIGTERM) /readyz answers 503 "not
// ready: shutting down" while a handler call still runs, before Run returns, so that a
// Kubernetes Service stops routing to a pod as soon as its drain starts; the call in flight
// still finishes (its output is sent) and Run returns nil.
func TestReadyzFalseWhileDraining(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
data_dir: %s
cache_dir: %s
admin: {addr: "127.0.0.1:0"}
tenants:
  default:
    bindings:
      slow: {queue: in, output: out, module: %q}
`, filepath.Join(dir, "data"), cacheDir, abs(t, flakyWasm))), dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, h)
	eventually(t, "the admin server", func() bool { return h.AdminAddr() != nil })
	base := "http://" + h.AdminAddr().String()
	get(t, base+"/readyz", "", 200)
	send(t, h, "default", "in", "sleep:5000")
	eventually(t, "the handler running", func() bool { return h.Status(t.Context()).Tenants[0].Bindings[0].InFlight == 1 })
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	var code int
	var body string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			code, body = resp.StatusCode, string(b)
		}
		if code == http.StatusServiceUnavailable {
			break
		}
		select {
		case err := <-stopped:
			t.Fatalf("Run returned (%v) with /readyz never 503 during the drain (last %d %s)", err, code, body)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %s 30s after the context ended", code, body)
		}
	}
	inFlight := h.Status(t.Context()).Tenants[0].Bindings[0].InFlight
	if !strings.Contains(body, "shutting down") || inFlight != 1 {
		t.Errorf("/readyz during the drain = %d %s with %d handlers in flight; want 503 shutting down while the call still runs", code, body, inFlight)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Run after the drain: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of the context ending")
	}
	if s := h.Status(t.Context()).Tenants[0].Bindings[0]; s.Processed != 1 {
		t.Errorf("%d messages processed after the drain, want the call in flight finished (1)", s.Processed)
	}
}
