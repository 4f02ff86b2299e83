package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/internal/testcache"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
)

// Set once by TestMain: the real binary, the e2e guest (testdata/flaky), and a compilation
// cache shared by every host the tests start (and by the other test packages of a CI run), so
// each module compiles once per run.
var (
	wqhostBin string
	flakyWasm string
	repoRoot  string
	cacheDir  string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "wqhost-cli-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		repoRoot, err = filepath.Abs("../..")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		wqhostBin = filepath.Join(dir, "wqhost")
		flakyWasm = filepath.Join(dir, "flaky.wasm")
		// Shared with the other test packages of a CI run (internal/testcache).
		if cacheDir, err = testcache.Shared(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for _, b := range []struct {
			env  []string
			args []string
		}{
			{nil, []string{"build", "-o", wqhostBin, "."}},
			{[]string{"GOOS=wasip1", "GOARCH=wasm"}, []string{"build", "-buildmode=c-shared", "-o", flakyWasm, "./testdata/flaky"}},
		} {
			cmd := exec.Command("go", b.args...)
			cmd.Env = append(os.Environ(), b.env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "go %s: %v\n%s", strings.Join(b.args, " "), err, out)
				return 1
			}
		}
		return m.Run()
	}())
}

type result struct {
	code           int
	stdout, stderr string
}

// wq runs the binary to completion in dir (the test's temp dir when empty).
func wq(t *testing.T, dir string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, wqhostBin, args...)
	if dir == "" {
		dir = t.TempDir()
	}
	cmd.Dir = dir
	cmd.Env = testEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("wqhost %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// testEnv drops WQHOST_ variables of the developer's shell, which would override configs,
// and points every host at the shared compilation cache.
func testEnv() []string {
	env := []string{"WQHOST_CACHE_DIR=" + cacheDir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WQHOST_") {
			env = append(env, kv)
		}
	}
	return env
}

func (r result) expect(t *testing.T, code int, what string, wants ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.stdout, r.stderr)
	}
	all := r.stdout + r.stderr
	for _, w := range wants {
		if !strings.Contains(all, w) {
			t.Errorf("%s: output lacks %q\nstdout:\n%s\nstderr:\n%s", what, w, r.stdout, r.stderr)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage: wqhost <command>"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"send", "body"}, "--queue is required"},
		{[]string{"send", "--queue", "q"}, "want one BODY argument or --file"},
		{[]string{"send", "--queue", "q", "--file", "f", "body"}, "either --file or BODY"},
		{[]string{"send", "--queue", "q", "--count", "0", "b"}, "--count 0"},
		{[]string{"send", "--queue", "q", "--file", "no-such-file"}, "no-such-file"},
		{[]string{"send", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"send", "--tenant", "nobody", "--queue", "q", "b"}, `tenant "nobody"`},
		{[]string{"status", "extra"}, "takes no arguments"},
		{[]string{"poison", "--queue", "q"}, "want one action"},
		{[]string{"poison", "frob", "--queue", "q"}, `unknown action "frob"`},
		{[]string{"poison", "list"}, "--queue is required"},
		{[]string{"poison", "list", "--queue", "q-poison"}, "give the original queue"},
		{[]string{"validate"}, "want exactly one module file"},
		{[]string{"validate", "no-such.wasm"}, "no-such.wasm: no such file"},
		{[]string{"validate", "--abi", "cobol", "x.wasm"}, `--abi "cobol"`},
		{[]string{"validate", "."}, "is a directory"},
		{[]string{"validate", "/dev/zero"}, "/dev/zero is a character device"},
		{[]string{"send", "--queue", "jobs-poison", "forged"}, "reserved for dead letters"},
		{[]string{"version", "x"}, "takes no arguments"},
		{[]string{"run", "extra"}, "takes no arguments"},
		{[]string{"run", "--demo", "--config", "c.yaml"}, "does not take --config"},
		{[]string{"run", "--config", "no-such.yaml"}, "no-such.yaml"},
		{[]string{"run", "--log-level", "loud", "--admin", "off"}, "log.level"},
		{[]string{"run", "--admin", "0.0.0.0:0"}, "admin.allow_unauthenticated"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			wq(t, "", tc.args...).expect(t, 2, "wqhost "+strings.Join(tc.args, " "), tc.want)
		})
	}
}

func TestHelpExit0(t *testing.T) {
	for _, cmd := range []string{"run", "send", "status", "poison", "validate", "version"} {
		t.Run(cmd, func(t *testing.T) {
			r := wq(t, "", cmd, "--help")
			r.expect(t, 0, cmd+" --help", "Usage: wqhost "+cmd)
			if !strings.Contains(r.stdout, "Usage: wqhost "+cmd) {
				t.Errorf("--help went to stderr, not stdout")
			}
		})
	}
	wq(t, "", "--help").expect(t, 0, "--help", "Commands:", "poison", "validate")
}

// TestBadConfigExit2: every class of bad config stops `run` before anything starts, with
// exit code 2 and an error naming the key (or file) and the reason.
func TestBadConfigExit2(t *testing.T) {
	noexport := filepath.Join(repoRoot, "runtime/testdata/noexport/noexport.wasm")
	binding := func(extra string) string {
		return "tenants:\n  default:\n    bindings:\n      b:\n        queue: jobs\n" + extra
	}
	for _, tc := range []struct {
		name, yaml string
		env        []string
		wants      []string
	}{
		{"yaml syntax", "tenants: [unclosed\n", nil, []string{"invalid YAML"}},
		{"unknown key", binding("        module: builtin:echo-go\n        modul: x.wasm\n"), nil,
			[]string{"tenants.default.bindings.b.modul", "unknown key"}},
		{"wrong type", binding("        module: builtin:echo-go\n        batch_size: lots\n"), nil,
			[]string{"tenants.default.bindings.b.batch_size", "integer", "lots"}},
		{"missing module file", binding("        module: nowhere/handler.wasm\n"), nil,
			[]string{"tenants.default.bindings.b.module", "nowhere/handler.wasm", "no such file"}},
		{"unknown policy", binding("        module: builtin:echo-go\n        scaler:\n          policy: magic\n"), nil,
			[]string{"tenants.default.bindings.b.scaler.policy", `"magic"`}},
		{"several problems", binding("        module: builtin:echo-go\n        batch_size: 99\n        backoff:\n          policy: nope\n"), nil,
			[]string{"2 problems", "batch_size", "backoff.policy"}},
		{"environment override", binding("        module: builtin:echo-go\n"), []string{"WQHOST_TENANTS__DEFAULT__BINDINGS__B__BATCH_SIZE=oops"},
			[]string{"batch_size", "oops"}},
		{"module does not fit the abi", binding("        module: " + noexport + "\n"), nil,
			[]string{"tenants.default.bindings.b", "missing export wqhost_handle"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "wqhost.yaml")
			if err := os.WriteFile(f, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(wqhostBin, "run", "--config", f, "--data-dir", filepath.Join(dir, "data"), "--admin", "127.0.0.1:0")
			cmd.Env = append(testEnv(), tc.env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				ee, ok := err.(*exec.ExitError)
				if !ok || ee.ExitCode() != 2 {
					t.Fatalf("exit: %v, want code 2\n%s", err, out.String())
				}
			case <-time.After(2 * time.Minute):
				cmd.Process.Kill()
				t.Fatalf("wqhost run with a bad config did not exit\n%s", out.String())
			}
			if strings.Contains(out.String(), "panic") {
				t.Fatalf("panicked:\n%s", out.String())
			}
			for _, w := range tc.wants {
				if !strings.Contains(out.String(), w) {
					t.Errorf("error lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		code  int
		wants []string
	}{
		{[]string{"examples/handlers/billing-go/billing-go.wasm"}, 0, []string{"ok, fits abi wqhost/v1"}},
		{[]string{"--abi", "wasi-stdio", "examples/handlers/upper-stdio/upper-stdio.wasm"}, 0, []string{"ok, fits abi wasi-stdio"}},
		{[]string{"runtime/testdata/noexport/noexport.wasm"}, 1, []string{"does not fit abi wqhost/v1", "1 problem", "missing export wqhost_handle"}},
		{[]string{"runtime/testdata/badimport/badimport.wasm"}, 1, []string{"imports unknown host function wqhost.no_such_function"}},
		{[]string{"--abi", "wasi-stdio", "examples/handlers/billing-go/billing-go.wasm"}, 1, []string{"missing export _start", "which only wqhost/v1 modules may use"}},
		{[]string{"README.md"}, 1, []string{"not a valid wasm module"}},
		// Its start function never returns: refused within --timeout, not accepted.
		{[]string{"--timeout", "500ms", "runtime/testdata/hang/hang.wasm"}, 1, []string{"does not load", "start function", "time limit (500ms)"}},
		{[]string{"--timeout", "0s", "runtime/testdata/hang/hang.wasm"}, 2, []string{"--timeout 0s"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			wq(t, repoRoot, append([]string{"validate"}, tc.args...)...).expect(t, tc.code, "validate", tc.wants...)
		})
	}
}

func TestVersion(t *testing.T) {
	r := wq(t, "", "version")
	r.expect(t, 0, "version", "wqhost ", "go1.", "wqhost/v1, wasi-stdio")
}

// ---- end-to-end: a running host ----

type hostProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	dir  string
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
	err  error
}

func (h *hostProc) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.Write(p)
}

func (h *hostProc) logs() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startHost starts `wqhost run --data-dir DIR --admin ADDR [args]` and waits for /readyz.
func startHost(t *testing.T, dir string, args ...string) *hostProc {
	t.Helper()
	return startHostEnv(t, dir, nil, args...)
}

func startHostEnv(t *testing.T, dir string, env []string, args ...string) *hostProc {
	t.Helper()
	h := &hostProc{t: t, addr: freeAddr(t), dir: dir, done: make(chan struct{})}
	h.cmd = exec.Command(wqhostBin, append([]string{"run", "--data-dir", filepath.Join(dir, "data"), "--admin", h.addr}, args...)...)
	h.cmd.Dir = dir
	h.cmd.Env = append(testEnv(), env...)
	h.cmd.Stdout, h.cmd.Stderr = h, h
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.err = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			h.cmd.Process.Kill()
			<-h.done
		}
		if t.Failed() {
			t.Logf("host log:\n%s", h.logs())
		}
	})
	waitFor(t, time.Minute, "host ready", func() bool {
		select {
		case <-h.done:
			t.Fatalf("host exited: %v\n%s", h.err, h.logs())
		default:
		}
		resp, err := http.Get("http://" + h.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return h
}

func (h *hostProc) get(path string) []byte {
	h.t.Helper()
	resp, err := http.Get("http://" + h.addr + path)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return b
}

func (h *hostProc) binding(tenant, name string) host.BindingStatus {
	h.t.Helper()
	var st host.Status
	if err := json.Unmarshal(h.get("/v1/status"), &st); err != nil {
		h.t.Fatalf("/v1/status: %v", err)
	}
	for _, tn := range st.Tenants {
		for _, b := range tn.Bindings {
			if tn.Name == tenant && b.Name == name {
				return b
			}
		}
	}
	h.t.Fatalf("/v1/status has no binding %s/%s", tenant, name)
	return host.BindingStatus{}
}

// stop sends sig and waits for the exit; it returns the exit code.
func (h *hostProc) stop(sig os.Signal, within time.Duration) int {
	h.t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		h.t.Fatal(err)
	}
	select {
	case <-h.done:
	case <-time.After(within):
		h.t.Fatalf("host still running %s after %v\n%s", within, sig, h.logs())
	}
	if h.err == nil {
		return 0
	}
	if ee, ok := h.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	h.t.Fatalf("host: %v", h.err)
	return -1
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drainQueue leases every message of queue in the local store at path and returns them
// (leased for a minute: call it on a store no host is running on, or on output queues).
func drainQueue(t *testing.T, path, queue string) []*listener.Message {
	t.Helper()
	ctx := context.Background()
	st, err := local.Open(ctx, path, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q, _ := st.Queue(ctx, queue)
	var all []*listener.Message
	for {
		ms, err := q.Receive(ctx, listener.MaxBatch, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return all
		}
		all = append(all, ms...)
	}
}

func metricValue(t *testing.T, metrics, name string, labels ...string) string {
	t.Helper()
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	t.Fatalf("no metric %s%v in /metrics", name, labels)
	return ""
}

// TestDefaultHostEndToEnd: `wqhost run` with no config at all, messages sent by `wqhost send`
// from another process, priced lines on the output queue, counts in /v1/status and /metrics,
// and the table of `wqhost status`.
func TestDefaultHostEndToEnd(t *testing.T) {
	dir := t.TempDir()
	h := startHost(t, dir)
	data := filepath.Join(dir, "data")
	const n = 25
	wq(t, dir, "send", "--data-dir", data, "--queue", "transactions", "--count", fmt.Sprint(n),
		`{"id":"tx-{n}","account":"acme","currency":"EUR","items":[{"sku":"a","quantity":3,"unit_price":2.5}]}`).
		expect(t, 0, "send --count", fmt.Sprintf("sent %d messages to transactions", n))
	wq(t, dir, "send", "--data-dir", data, "--queue", "transactions", `{"id":"tx-bad","account":"acme"}`).
		expect(t, 0, "send one", "sent message")

	waitFor(t, time.Minute, "26 messages settled", func() bool {
		b := h.binding("default", "billing")
		// The depths shown are the listener's own, read when it finds the queue drained.
		return b.Processed == n && b.Poisoned == 1 && b.Depth == 0 && b.DeadLetterDepth == 1
	})
	b := h.binding("default", "billing")
	if b.Queue != "transactions" || b.Depth != 0 || b.DeadLetterDepth != 1 || b.ModuleDigest == "" {
		t.Errorf("status: queue %q depth %d dead %d digest %q", b.Queue, b.Depth, b.DeadLetterDepth, b.ModuleDigest)
	}
	m := string(h.get("/metrics"))
	if v := metricValue(t, m, "wqhost_messages_processed_total", `binding="billing"`, `tenant="default"`); v != fmt.Sprint(n) {
		t.Errorf("wqhost_messages_processed_total = %s, want %d", v, n)
	}
	if v := metricValue(t, m, "wqhost_messages_poisoned_total", `binding="billing"`); v != "1" {
		t.Errorf("wqhost_messages_poisoned_total = %s, want 1", v)
	}

	st := wq(t, dir, "status", "--admin", h.addr)
	st.expect(t, 0, "status", "TENANT", "PROCESSED", "billing", "transactions")
	if !strings.Contains(st.stdout, fmt.Sprint(n)) {
		t.Errorf("status table lacks the processed count:\n%s", st.stdout)
	}
	js := wq(t, dir, "status", "--admin", h.addr, "--json")
	var parsed host.Status
	if err := json.Unmarshal([]byte(js.stdout), &parsed); err != nil {
		t.Errorf("status --json: %v\n%s", err, js.stdout)
	}

	wq(t, dir, "poison", "list", "--data-dir", data, "--queue", "transactions").
		expect(t, 0, "poison list", "lacks currency", "1 dead letter in transactions-poison")

	// SIGHUP asks for a reload; it must never stop the host (Go's default for SIGHUP).
	if err := h.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the reload logged", func() bool { return strings.Contains(h.logs(), "SIGHUP") })
	select {
	case <-h.done:
		t.Fatalf("host exited on SIGHUP: %v", h.err)
	default:
	}
	h.binding("default", "billing")

	if code := h.stop(os.Interrupt, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGINT\n%s", code, h.logs())
	}
	outs := drainQueue(t, filepath.Join(data, "wqhost.db"), "priced")
	if len(outs) != n {
		t.Fatalf("%d priced lines, want %d", len(outs), n)
	}
	seen := map[string]bool{}
	for _, o := range outs {
		var line struct {
			ID         string `json:"id"`
			TotalCents int64  `json:"total_cents"`
		}
		if err := json.Unmarshal(o.Body, &line); err != nil || line.TotalCents != 900 {
			t.Errorf("priced line %s: total %d (%v), want 900 (750 + 20%% tax)", o.Body, line.TotalCents, err)
		}
		seen[line.ID] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct transactions priced, want %d", len(seen), n)
	}
}

// flakyConfig binds the e2e guest. The back-off is long (30-60 s idle between polls), so a
// message from `wqhost send` is only picked up promptly through the cross-process wake-up.
func flakyConfig(t *testing.T, dir string) string {
	t.Helper()
	cfg := fmt.Sprintf(`
tenants:
  default:
    bindings:
      flaky:
        queue: jobs
        output: done
        module: %s
        max_dequeue_count: 3
        backoff:
          min: 30s
          max: 60s
        poison:
          base_delay: 10ms
          max_delay: 50ms
`, flakyWasm)
	f := filepath.Join(dir, "wqhost.yaml")
	if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRetryAndPoisonEndToEnd: a guest that asks for a retry and then succeeds is processed
// once; a guest that always fails ends in jobs-poison after max_dequeue_count deliveries with
// its reason, and `poison requeue` brings it back to jobs.
func TestRetryAndPoisonEndToEnd(t *testing.T) {
	dir := t.TempDir()
	cfg := flakyConfig(t, dir)
	h := startHost(t, dir, "--config", cfg)
	send := func(body string) {
		wq(t, dir, "send", "--config", cfg, "--data-dir", filepath.Join(dir, "data"), "--queue", "jobs", body).expect(t, 0, "send "+body)
	}
	time.Sleep(500 * time.Millisecond) // let the idle worker settle into its long back-off
	sent := time.Now()
	send("flaky:2:hello")
	waitFor(t, 20*time.Second, "the retried message processed", func() bool { return h.binding("default", "flaky").Processed == 1 })
	t.Logf("send to processed (with one 10 ms retry), host idling with a 30-60 s back-off: %s", time.Since(sent).Round(time.Millisecond))
	b := h.binding("default", "flaky")
	if b.Retried != 1 || b.Poisoned != 0 {
		t.Errorf("after retry-then-ok: retried %d poisoned %d, want 1 and 0", b.Retried, b.Poisoned)
	}

	send("fail:boom")
	waitFor(t, 30*time.Second, "the failing message dead-lettered", func() bool { return h.binding("default", "flaky").Poisoned == 1 })
	data := filepath.Join(dir, "data")
	list := wq(t, dir, "poison", "list", "--config", cfg, "--data-dir", data, "--queue", "jobs", "--json")
	list.expect(t, 0, "poison list")
	var dl host.DeadLetter
	if err := json.Unmarshal([]byte(strings.TrimSpace(list.stdout)), &dl); err != nil {
		t.Fatalf("poison list --json: %v\n%s", err, list.stdout)
	}
	if string(dl.Body) != "fail:boom" || dl.DequeueCount != 3 || !strings.Contains(dl.Reason, "boom") || dl.DeadLetteredAt == "" {
		t.Errorf("dead letter = %+v; want body fail:boom, dequeue count 3, reason naming boom", dl)
	}
	wq(t, dir, "poison", "list", "--config", cfg, "--data-dir", data, "--queue", "jobs").
		expect(t, 0, "poison list table", "DEQUEUED", "boom", "1 dead letter in jobs-poison")

	wq(t, dir, "poison", "requeue", "--config", cfg, "--data-dir", data, "--queue", "jobs").
		expect(t, 0, "poison requeue", "requeued 1 dead letters from jobs-poison to jobs")
	// Back on jobs, it fails its three deliveries again and returns to the poison queue.
	waitFor(t, 30*time.Second, "the requeued message processed again", func() bool { return h.binding("default", "flaky").Poisoned == 2 })
	if b := h.binding("default", "flaky"); b.Failed != 7 {
		t.Errorf("failed = %d, want 7 (one retry of the flaky message, then 3 deliveries twice)", b.Failed)
	}
	wq(t, dir, "poison", "purge", "--config", cfg, "--data-dir", data, "--queue", "jobs").
		expect(t, 0, "poison purge", "purged 1 dead letters")
	wq(t, dir, "poison", "list", "--config", cfg, "--data-dir", data, "--queue", "jobs").
		expect(t, 0, "poison list after purge", "no dead letters in jobs-poison")

	if code := h.stop(os.Interrupt, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	outs := drainQueue(t, filepath.Join(data, "wqhost.db"), "done")
	if len(outs) != 1 || string(outs[0].Body) != "hello after 2" {
		var bodies []string
		for _, o := range outs {
			bodies = append(bodies, string(o.Body))
		}
		t.Errorf("outputs %q, want exactly [\"hello after 2\"] (processed once)", bodies)
	}
}

// TestGracefulShutdown: SIGTERM while handlers run. The host exits 0; every message is either
// processed (output written, message deleted) or back in the queue and visible at once —
// none stays leased and invisible, none is lost or half done.
func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	cfg := flakyConfig(t, dir)
	h := startHost(t, dir, "--config", cfg)
	const n = 200
	data := filepath.Join(dir, "data")
	wq(t, dir, "send", "--config", cfg, "--data-dir", data, "--queue", "jobs", "--count", fmt.Sprint(n), "spin:2:m{n}").
		expect(t, 0, "send")
	var at host.BindingStatus
	waitFor(t, time.Minute, "processing under way", func() bool {
		at = h.binding("default", "flaky")
		return at.Processed >= 5 && at.InFlight > 0
	})
	if code := h.stop(syscall.SIGTERM, 2*time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, h.logs())
	}

	ctx := context.Background()
	path := filepath.Join(data, "wqhost.db")
	outs := drainQueue(t, path, "done")
	st, err := local.Open(ctx, path, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	jobs, _ := st.Queue(ctx, "jobs")
	left, err := jobs.Depth(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var visible int
	for {
		ms, err := jobs.Receive(ctx, listener.MaxBatch, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		visible += len(ms)
	}
	if int64(visible) != left {
		t.Errorf("%d messages left in jobs but only %d visible: leased messages stayed invisible after shutdown", left, visible)
	}
	seen := map[string]bool{}
	for _, o := range outs {
		if seen[string(o.Body)] {
			t.Errorf("output %s written twice", o.Body)
		}
		seen[string(o.Body)] = true
	}
	if len(outs)+int(left) != n {
		t.Errorf("%d processed + %d left = %d, want %d: messages lost or processed without being deleted", len(outs), left, len(outs)+int(left), n)
	}
	// Each call in flight when status was read either finished before SIGTERM or was in
	// flight at SIGTERM, and a graceful shutdown lets those finish too.
	if want := int(at.Processed) + at.InFlight; len(outs) < want {
		t.Errorf("%d processed, but %d were done or in flight before SIGTERM: in-flight handlers were cut off", len(outs), want)
	}
	if left == 0 {
		t.Logf("note: everything finished before SIGTERM took effect; the drain was not exercised")
	}
	t.Logf("at SIGTERM: %d processed, %d released back to the queue", len(outs), left)
}

// TestDemo runs the README's main job: `wqhost run --demo` on the embedded default.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	r := wq(t, dir, "run", "--demo", "--data-dir", filepath.Join(dir, "data"))
	r.expect(t, 0, "run --demo", "processed  2988", "poisoned   12", "msg/s", "total_cents", "lacks")
	t.Logf("demo:\n%s", r.stdout)
}

// TestSendBodies checks what lands on the queue for each way of giving bodies, read back
// from the local store in order.
func TestSendBodies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		file  string
		want  []string
	}{
		{"body", []string{"hello"}, "", "", []string{"hello"}},
		{"count numbers", []string{"--count", "3", "m-{n}"}, "", "", []string{"m-1", "m-2", "m-3"}},
		{"count repeats", []string{"--count", "2", "same"}, "", "", []string{"same", "same"}},
		{"file whole", []string{"--file", "F"}, "", "a\nb\n", []string{"a\nb\n"}},
		{"file lines", []string{"--file", "F", "--lines"}, "", "a\n\n  b  \nc", []string{"a", "b", "c"}},
		{"stdin", []string{"--file", "-"}, "from stdin", "", []string{"from stdin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"send", "--data-dir", filepath.Join(dir, "data"), "--queue", "q"}
			for _, a := range tc.args {
				if a == "F" {
					a = filepath.Join(dir, "body.txt")
					if err := os.WriteFile(a, []byte(tc.file), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				args = append(args, a)
			}
			cmd := exec.Command(wqhostBin, args...)
			cmd.Dir, cmd.Env, cmd.Stdin = dir, testEnv(), strings.NewReader(tc.stdin)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("send: %v\n%s", err, out)
			}
			var got []string
			for _, m := range drainQueue(t, filepath.Join(dir, "data", "wqhost.db"), "q") {
				got = append(got, string(m.Body))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("queue holds %q, want %q", got, tc.want)
			}
		})
	}
}

// TestStatusToken: with admin.token_env set, `wqhost status` sends the token from the
// variable --token-env names, and without it fails (exit 1) saying which variable to set.
func TestStatusToken(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "wqhost.yaml")
	yaml := "admin:\n  token_env: E2E_ADMIN_TOKEN\ntenants:\n  default:\n    bindings:\n      echo:\n        queue: jobs\n        module: builtin:echo-go\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHostEnv(t, dir, []string{"E2E_ADMIN_TOKEN=s3cret"}, "--config", cfg)
	wq(t, dir, "status", "--admin", h.addr, "--token-env", "E2E_ADMIN_TOKEN").
		expect(t, 1, "status without the token", "401", "$E2E_ADMIN_TOKEN")
	cmd := exec.Command(wqhostBin, "status", "--admin", h.addr, "--token-env", "E2E_ADMIN_TOKEN")
	cmd.Env = append(testEnv(), "E2E_ADMIN_TOKEN=s3cret")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "echo") {
		t.Fatalf("status with the token: %v\n%s", err, out)
	}
}

// TestRunFailureExit1: a valid config that cannot run (the admin port is taken) is a runtime
// failure, exit code 1, naming the address.
func TestRunFailureExit1(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	wq(t, dir, "run", "--data-dir", filepath.Join(dir, "data"), "--admin", l.Addr().String()).
		expect(t, 1, "run on a taken port", "admin.addr "+l.Addr().String(), "address already in use")
}

func TestCall(t *testing.T) {
	vowelsOut := `-> out: {"count":3,"total":3,"vowels":"aeiouAEIOU"}`
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		wants []string
	}{
		{"tinygo vowels", []string{"examples/handlers/count-vowels-tinygo/count-vowels-tinygo.wasm", "--body", "Hello, World"}, 0, []string{"status: ok", "outputs: 1", vowelsOut}},
		{"go vowels with config", []string{"examples/handlers/count-vowels-go/count-vowels-go.wasm", "--body", "xyz", "--config", "vowels=xy"}, 0, []string{`{"count":2,"total":2,"vowels":"xy"}`}},
		{"rust vowels", []string{"examples/handlers/count-vowels-rust/count-vowels-rust.wasm", "--body", "Hello, World"}, 0, []string{vowelsOut}},
		{"body from a file", []string{"examples/handlers/echo-tinygo/echo-tinygo.wasm", "--file", "examples/handlers/README.md", "--output", "copies"}, 0, []string{"-> copies: "}},
		{"reject with its reason", []string{"examples/handlers/billing-tinygo/billing-tinygo.wasm", "--body", `{"id":`}, 1, []string{"status: reject", "reason: billing: malformed transaction JSON", "outputs: 0"}},
		{"control characters escaped", []string{"examples/handlers/echo-go/echo-go.wasm", "--body", "a\x1b[2Jb"}, 0, []string{`-> out: a\x1b[2Jb`}},
		{"wasi-stdio", []string{"--abi", "wasi-stdio", "examples/handlers/upper-stdio/upper-stdio.wasm", "--body", "shout\n"}, 0, []string{"status: ok", `-> out: SHOUT\x0a`}},
		{"wrong abi", []string{"--abi", "wasi-stdio", "examples/handlers/billing-go/billing-go.wasm"}, 2, []string{"missing export _start"}},
		{"unknown meta", []string{"examples/handlers/echo-go/echo-go.wasm", "--meta", "colour=red"}, 2, []string{`--meta "colour": unknown key`}},
		{"body and file", []string{"examples/handlers/echo-go/echo-go.wasm", "--body", "x", "--file", "README.md"}, 2, []string{"give one of them"}},
		{"missing file", []string{"nope.wasm"}, 2, []string{"nope.wasm: no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wq(t, repoRoot, append([]string{"call"}, tc.args...)...).expect(t, tc.code, "call", tc.wants...)
		})
	}
}

// TestPeekCommand: peek shows a queue's messages escaped for the terminal and leaves them there.
func TestPeekCommand(t *testing.T) {
	dir := t.TempDir()
	wq(t, dir, "send", "--queue", "jobs-done", "plain").expect(t, 0, "send")
	wq(t, dir, "send", "--queue", "jobs-done", "evil\x1b[2Jx").expect(t, 0, "send")
	for range 2 {
		r := wq(t, dir, "peek", "--queue", "jobs-done")
		r.expect(t, 0, "peek", "plain", `evil\x1b[2Jx`, "2 messages shown from jobs-done (not consumed)")
		if strings.Contains(r.stdout, "\x1b") {
			t.Fatalf("peek printed a raw escape character:\n%q", r.stdout)
		}
	}
	wq(t, dir, "peek", "--queue", "jobs-done", "--limit", "1", "--json").expect(t, 0, "peek --json", `"body":"plain"`, `"dequeue_count":0`)
	wq(t, dir, "peek", "--queue", "jobs-poison").expect(t, 0, "peek empty", "no messages in jobs-poison")
	wq(t, dir, "peek").expect(t, 2, "peek without queue", "--queue is required")
}

// TestModuleThatIsNotARegularFile: a module path that is a FIFO (which used to hang the
// host, deaf to SIGTERM) or /dev/zero (which took it past 4 GiB) is refused at load with
// exit 2 and a message naming the key, within a second of wall time on a quiet machine (the
// bound asserted here is generous, for a loaded CI machine; a hang would hit it).
func TestModuleThatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "handler.wasm")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ module, want string }{
		{fifo, "is a FIFO"}, {"/dev/zero", "is a character device"}, {dir, "is a directory"},
	} {
		cfg := filepath.Join(dir, "wqhost.yaml")
		yaml := fmt.Sprintf("data_dir: %s\nadmin: {addr: \"off\"}\ntenants:\n  default:\n    bindings:\n      b: {queue: jobs, module: %q}\n", filepath.Join(dir, "data"), tc.module)
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		wq(t, dir, "run", "--config", cfg).expect(t, 2, "run with module "+tc.module, "tenants.default.bindings.b.module", tc.want)
		if el := time.Since(start); el > 20*time.Second {
			t.Errorf("module %s: refused after %s", tc.module, el)
		}
	}
}

// TestSendRefusesOversizeBody: a body above the tenant's limits.max_message_bytes is refused
// by send with exit 2 naming the limit, before anything is sent (the host would reject it).
func TestSendRefusesOversizeBody(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "wqhost.yaml")
	yaml := fmt.Sprintf("data_dir: %s\nadmin: {addr: \"off\"}\ntenants:\n  default:\n    limits: {max_message_bytes: 1KiB}\n    bindings:\n      b: {queue: jobs, module: 'builtin:echo-go'}\n", filepath.Join(dir, "data"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "above tenants.default.limits.max_message_bytes 1KiB"
	wq(t, dir, "send", "--config", cfg, "--queue", "jobs", "--file", big).expect(t, 2, "send of 4 KiB", want)
	wq(t, dir, "send", "--config", cfg, "--queue", "jobs", strings.Repeat("y", 1025)).expect(t, 2, "send of 1025 bytes", want)
	wq(t, dir, "send", "--config", cfg, "--queue", "jobs", "--count", "3", strings.Repeat("y", 1020)+"{n}").expect(t, 0, "send of 1021 bytes", "sent 3 messages")
	wq(t, dir, "send", "--config", cfg, "--queue", "jobs", "--count", "10", strings.Repeat("y", 1023)+"{n}").expect(t, 2, "send whose 10th body is 1025 bytes", want)
}

// TestSendCountStreams: `send --count 2000000000` used to preallocate every body and die
// out of memory; it now streams. The child's RSS is sampled while it sends, then it is
// stopped early.
func TestSendCountStreams(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(wqhostBin, "send", "--data-dir", filepath.Join(dir, "data"), "--queue", "jobs", "--count", "2000000000", "m{n}")
	cmd.Dir, cmd.Env = dir, testEnv()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var peak int64
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if rss := rssOf(cmd.Process.Pid); rss > peak {
			peak = rss
		}
		time.Sleep(50 * time.Millisecond)
	}
	if peak == 0 {
		t.Fatalf("no RSS sampled (process exited? %s)", errb.String())
	}
	t.Logf("send --count 2000000000: peak RSS %d MiB over 3s", peak>>20)
	if peak > 200<<20 {
		t.Errorf("send --count 2000000000: RSS %d MiB, want bounded (< 200 MiB)", peak>>20)
	}
}

// rssOf returns a process's resident set in bytes from /proc, 0 if it is gone.
func rssOf(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestRunOnBusyAdminPort: a second host on a busy admin port fails naming admin.addr before
// it builds anything, so it never logs "host ready" first.
func TestRunOnBusyAdminPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "wqhost.yaml")
	yaml := fmt.Sprintf("data_dir: %s\nadmin: {addr: %q}\ntenants:\n  default:\n    bindings:\n      b: {queue: jobs, module: 'builtin:echo-go'}\n", filepath.Join(dir, "data"), ln.Addr().String())
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	r := wq(t, dir, "run", "--config", cfg)
	if r.code == 0 || !strings.Contains(r.stderr, "admin.addr") || strings.Contains(r.stderr+r.stdout, "host ready") {
		t.Fatalf("run on a busy admin port: exit %d, stderr %q; want a failure naming admin.addr and no \"host ready\"", r.code, r.stderr)
	}
}
