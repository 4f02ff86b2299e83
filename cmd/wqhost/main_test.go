package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/internal/testcache"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
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
	if code, ok := rssHelper(); ok {
		os.Exit(code)
	}
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
			// -buildvcs=auto as a checkout's plain go build (this machine's go env turns
			// stamping off): the binary carries the commit TestVersionNamesCommit checks.
			{nil, []string{"build", "-buildvcs=auto", "-o", wqhostBin, "."}},
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
		{[]string{"send", "--queue", "q", "--delay", "-5s", "b"}, "--delay -5s: must be within 0..168h0m0s"},
		{[]string{"send", "--queue", "q", "--delay", "2562047h", "b"}, "--delay 2562047h0m0s: must be within 0..168h0m0s"},
		{[]string{"send", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"send", "--tenant", "nobody", "--queue", "q", "b"}, `tenant "nobody"`},
		{[]string{"status", "extra"}, "takes no arguments"},
		{[]string{"status", "--admin", "ftp://x"}, `--admin "ftp://x": want host:port or an http:// or https:// URL`},
		{[]string{"poison", "--queue", "q"}, "want one action"},
		{[]string{"poison", "frob", "--queue", "q"}, `unknown action "frob"`},
		{[]string{"poison", "list"}, "--queue is required"},
		{[]string{"poison", "list", "--queue", "q-poison"}, "give the original queue"},
		{[]string{"poison", "list", "--queue", "q", "--after", "garbage"}, `cursor "garbage": not a cursor this queue gave`},
		{[]string{"validate"}, "want exactly one module file"},
		{[]string{"call", "--timeout", "-1s", "x.wasm"}, "--timeout -1s: want above 0 and at most 1h0m0s"},
		{[]string{"call", "--timeout", "0s", "x.wasm"}, "--timeout 0s: want above 0"},
		{[]string{"call", "--memory", "1", "x.wasm"}, `--memory "1": want a size such as 64MiB, within 1MiB..4GiB`},
		{[]string{"validate", "no-such.wasm"}, "no-such.wasm: no such file"},
		{[]string{"validate", "--abi", "cobol", "x.wasm"}, `--abi "cobol"`},
		{[]string{"validate", "."}, "is a directory"},
		{[]string{"validate", "/dev/zero"}, "/dev/zero is a character device"},
		{[]string{"send", "--queue", "jobs-poison", "forged"}, "reserved for dead letters"},
		{[]string{"version", "x"}, "takes no arguments"},
		{[]string{"new", "go", ""}, "the directory is empty"},
		{[]string{"run", "extra"}, "takes no arguments"},
		{[]string{"run", "--demo", "--config", "c.yaml"}, "does not take --config"},
		{[]string{"run", "--config", "no-such.yaml"}, "no-such.yaml"},
		{[]string{"run", "--config", "/dev/zero"}, "/dev/zero is a character device"},
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

func TestVersion(t *testing.T) {
	r := wq(t, "", "version")
	r.expect(t, 0, "version", "wqhost ", "go1.", "wqhost/v1, wasi-stdio")
}

// ---- end-to-end: a running host ----

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
		ms, err := jobs.Receive(ctx, queue.MaxBatch, time.Minute)
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

// TestDemoDoesNotWaitOutADelayedMessage: a message already in the sample's queue with an
// hour's delay does not keep the demo running for that hour: it ends once the sample is
// settled, and says the message is left, delayed.
func TestDemoDoesNotWaitOutADelayedMessage(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	wq(t, dir, "send", "--data-dir", data, "--queue", "transactions", "--delay", "1h", `{"id":"later"}`).
		expect(t, 0, "send --delay 1h")
	r := wq(t, dir, "run", "--demo", "--data-dir", data)
	r.expect(t, 0, "run --demo", "processed  2988", "poisoned   12", "1 messages left in transactions, 1 of them delayed")
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
