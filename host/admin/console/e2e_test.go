package console_test

// The console's browser test: headless Chromium (Debian's chromium package, which
// scripts/test.sh installs) driven by chromedp against a real host running real .wasm
// handlers. This file holds the harness; e2e_flow_test.go the steps.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/internal/testcache"
	"github.com/wqhost/wqhost/listener/queue"
)

// Tokens of the test's host: the host's and one per tenant.
const (
	hostToken = "e2e-host-secret"
	acmeToken = "e2e-acme-secret"
	betaToken = "e2e-beta-secret"
)

// Fixtures: the hot-reload fixture's two builds and the host tests' flaky handler.
const (
	fixtureV1 = "../../testdata/versioned/v1.wasm"
	fixtureV2 = "../../testdata/versioned/v2.wasm"
	flaky     = "../../testdata/flaky/flaky.wasm"
)

// e2eHost is a running host of two tenants: acme (a memory budget of 512 MiB; echo: in ->
// out on the versioned fixture; slow and jobs on flaky, jobs dead-lettering at the first
// failure) and beta (secret on flaky, the same way).
type e2eHost struct {
	h    *host.Host
	dir  string
	base string // http://127.0.0.1:port
	stop func() // stops Run and waits for it (also at cleanup)
}

func startHost(t *testing.T) *e2eHost {
	t.Helper()
	t.Setenv("E2E_HOST_TOKEN", hostToken)
	t.Setenv("E2E_ACME_TOKEN", acmeToken)
	t.Setenv("E2E_BETA_TOKEN", betaToken)
	dir := t.TempDir()
	copyFile(t, fixtureV1, filepath.Join(dir, "handler.wasm"))
	copyFile(t, flaky, filepath.Join(dir, "flaky.wasm"))
	const fast = `{min: 5ms, max: 50ms}`
	yaml := fmt.Sprintf(`data_dir: %s
cache_dir: %s
admin: {addr: "127.0.0.1:0", token_env: E2E_HOST_TOKEN}
tenants:
  acme:
    token_env: E2E_ACME_TOKEN
    limits: {memory_budget: 512MiB}
    bindings:
      echo: {queue: in, output: out, module: handler.wasm, backoff: %[3]s}
      slow: {queue: slow, output: done, module: flaky.wasm, max_workers: 1, batch_size: 1, pool: {max_instances: 1}, backoff: %[3]s}
      jobs: {queue: jobs, module: flaky.wasm, max_dequeue_count: 1, backoff: %[3]s}
  beta:
    token_env: E2E_BETA_TOKEN
    bindings:
      secret: {queue: in, module: flaky.wasm, max_dequeue_count: 1, backoff: %[3]s}
`, filepath.Join(dir, "data"), testcache.Dir(t), fast)
	if err := os.WriteFile(filepath.Join(dir, "wqhost.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := source.LoadConfig(config.LoadOptions{File: filepath.Join(dir, "wqhost.yaml"), Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	h, err := host.New(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	e := &e2eHost{h: h, dir: dir, base: "http://" + h.AdminAddr().String()}
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(host.ShutdownBound(cfg) + 5*time.Second):
				t.Errorf("host.Run did not return within %v of its cancel", host.ShutdownBound(cfg)+5*time.Second)
			}
		})
	}
	t.Cleanup(e.stop)
	return e
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// send puts bodies on tenant's queue and wakes its binding.
func (e *e2eHost) send(t *testing.T, tenant, q string, bodies ...string) {
	t.Helper()
	qq, err := e.h.OpenQueue(context.Background(), tenant, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		if _, err := qq.Send(context.Background(), []byte(b), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_ = e.h.Notify(tenant, q)
}

// api calls the admin API directly (not through the console) and returns status and body.
func (e *e2eHost) api(t *testing.T, method, path, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// deadDepth is the dead-letter depth status reports for tenant's binding.
func (e *e2eHost) deadDepth(t *testing.T, tenant, binding string) int64 {
	t.Helper()
	d, err := e.h.BindingDetail(context.Background(), tenant, binding)
	if err != nil {
		t.Fatal(err)
	}
	return d.Status.DeadLetterDepth
}

// eventually polls cond until it holds, failing after within.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chromium finds the browser: $WQHOST_CHROMIUM, or chromium / chromium-browser /
// google-chrome on PATH. Without one the test skips, loudly, except in CI (CI=true), where
// it fails: scripts/test.sh installs chromium.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WQHOST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "NO CHROMIUM: the console's browser test did not run. Install Debian's chromium (scripts/install-chromium.sh) or set WQHOST_CHROMIUM."
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip("*** " + msg + " ***")
	return ""
}

// browser drives one headless Chromium tab; it records screenshots and dialogs.
type browser struct {
	t       *testing.T
	ctx     context.Context
	base    string
	shots   string // screenshot directory
	saved   []string
	dialogs chan string
}

// artifactsDir is where screenshots go, kept after the test for CI to collect:
// $WQHOST_ARTIFACTS/console, or wqhost-console-artifacts in the system temp directory.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "wqhost-console-artifacts")
	if a := os.Getenv("WQHOST_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "console")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	bin := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 1000))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shots: artifactsDir(t), dialogs: make(chan string, 16)}
	// The first run starts the browser; it must not carry a timeout (it would stop it).
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			select {
			case b.dialogs <- d.Message:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stepTimeout bounds each browser step: generous, for a loaded 2-core machine.
const stepTimeout = 60 * time.Second

// do runs steps within stepTimeout; on failure it saves a screenshot and fails the test
// naming the step.
func (b *browser) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.shot("FAILED-" + step)
		b.t.Fatalf("browser step %q: %v", step, err)
	}
}

// eval evaluates expr (awaiting a promise) and decodes its JSON value into out.
func (b *browser) eval(step, expr string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.shot("FAILED-" + step)
		b.t.Fatalf("browser step %q: %v", step, err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatalf("browser step %q: decoding %s: %v", step, raw, err)
		}
	}
}

// waitFor waits until the JavaScript expression is truthy. A poll that a navigation cut
// (a form just submitted) starts again on the new page.
func (b *browser) waitFor(step, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		ctx, cancel := context.WithDeadline(b.ctx, deadline)
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(0),
			chromedp.WithPollingInterval(100*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().Before(deadline) && navigated(err) {
			continue
		}
		b.shot("FAILED-" + step)
		b.t.Fatalf("browser step %q: waiting for %s: %v", step, expr, err)
	}
}

// navigated reports an error of a script cut by a navigation.
func navigated(err error) bool {
	s := err.Error()
	return strings.Contains(s, "navigated or closed") || strings.Contains(s, "context was destroyed") ||
		strings.Contains(s, "Cannot find context")
}

// open navigates to the console path p and waits for sel.
func (b *browser) open(p, sel string) {
	b.t.Helper()
	b.do("open "+p, chromedp.Navigate(b.base+p), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// shot saves a full-page screenshot as <n>-<name>.png.
func (b *browser) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(b.shots, fmt.Sprintf("%02d-%s.png", len(b.saved)+1, strings.NewReplacer("/", "_", " ", "-").Replace(name)))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Errorf("saving screenshot: %v", err)
		return
	}
	b.saved = append(b.saved, p)
}

// fetchStatus runs fetch(path, init) in the page and returns the answer's status.
func (b *browser) fetchStatus(step, path, init string) int {
	b.t.Helper()
	var code int
	b.eval(step, fmt.Sprintf(`fetch(%q, %s).then(r => r.status)`, path, init), &code)
	return code
}

// post is fetch's init for a state-changing request with the page's CSRF token.
func post(body string) string {
	return fmt.Sprintf(`{method: "POST", headers: {"Content-Type": "application/json", "X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content}, body: %q}`, body)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
