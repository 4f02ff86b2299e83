package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/internal/testcache"
	"github.com/wqhost/wqhost/listener/queue"
)

// flakyWasm is the test fixture; see testdata/flaky/main.go.
const flakyWasm = "testdata/flaky/flaky.wasm"

// cacheDir is shared by every test's host, and with the other test packages of a CI run
// (internal/testcache), so each module compiles once (compiling 2 MB Go-built modules
// dominates the run time, under -race most of all).
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := testcache.Shared()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = dir
	os.Exit(m.Run())
}

func abs(t testing.TB, rel string) string {
	t.Helper()
	p, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// fast are binding settings that keep tests quick: short idle back-off and retry delays.
const fast = `
        max_dequeue_count: 3
        backoff: {min: 5ms, max: 50ms}
        poison: {base_delay: 5ms, max_delay: 20ms}
`

// newHost builds a host on a temp data dir from a tenants section (indented by 2).
func newHost(t *testing.T, tenants string) (*Host, *config.Config) {
	t.Helper()
	return newHostWith(t, "", tenants)
}

// newHostWith is newHost with extra top-level keys.
func newHostWith(t testing.TB, top, tenants string) (*Host, *config.Config) {
	t.Helper()
	cfg := hostConfig(t, top, tenants)
	h, err := New(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return h, cfg
}

// hostConfig is a host config on a temp data dir, the shared compile cache and no admin
// API (the default port may be taken), with extra top-level keys and a tenants section
// (indented by 2).
func hostConfig(t testing.TB, top, tenants string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	yaml := fmt.Sprintf("data_dir: %s\ncache_dir: %s\nadmin: {addr: \"off\"}\n%stenants:\n%s", filepath.Join(dir, "data"), cacheDir, top, tenants)
	cfg, err := config.Parse([]byte(yaml), dir)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return cfg
}

func testLogger(testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// run starts h.Run and returns a stop function that cancels it and returns Run's error.
func run(t testing.TB, h *Host) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var once bool
	var err error
	stop = func() error {
		if !once {
			once = true
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return within 30s of cancel")
			}
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func send(t *testing.T, h *Host, tenant, qname string, bodies ...string) {
	t.Helper()
	q, err := h.OpenQueue(context.Background(), tenant, qname)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		if _, err := q.Send(context.Background(), []byte(b), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_ = h.Notify(tenant, qname)
}

func depth(t testing.TB, h *Host, tenant, qname string) int64 {
	t.Helper()
	q, err := h.OpenQueue(context.Background(), tenant, qname)
	if err != nil {
		t.Fatal(err)
	}
	d, err := q.Depth(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drainBodies receives and deletes every message of a queue, returning the bodies.
func drainBodies(t *testing.T, h *Host, tenant, qname string) []*queue.Message {
	t.Helper()
	q, err := h.OpenQueue(context.Background(), tenant, qname)
	if err != nil {
		t.Fatal(err)
	}
	var out []*queue.Message
	for {
		ms, err := q.Receive(context.Background(), 32, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return out
		}
		out = append(out, ms...)
		for _, m := range ms {
			if err := q.Delete(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func bindingStatus(t *testing.T, h *Host, tenant, binding string) BindingStatus {
	t.Helper()
	for _, ts := range h.Status(context.Background()).Tenants {
		if ts.Name != tenant {
			continue
		}
		for _, b := range ts.Bindings {
			if b.Name == binding {
				return b
			}
		}
	}
	t.Fatalf("no status for %s/%s", tenant, binding)
	return BindingStatus{}
}

func TestMessagesReachOutputQueueAndAreCounted(t *testing.T) {
	// The flaky fixture echoes ordinary bodies; one module for all echo bindings keeps the
	// number of compilations (the test's cost under -race) down.
	echo := abs(t, flakyWasm)
	h, _ := newHost(t, fmt.Sprintf(`
  default:
    bindings:
      echo: {queue: in, output: out, module: %q}
      billing:
        queue: transactions
        output: priced
        module: builtin:billing-go
        config: {tax_rate: "0.2"}
  acme:
    bindings:
      echo: {queue: in, output: out, module: %q}
      billing:
        queue: transactions
        output: priced
        module: builtin:billing-tinygo
        config: {tax_rate: "0.2"}
`, echo, echo))
	stop := run(t, h)
	for i := range 20 {
		send(t, h, "default", "in", "msg-"+strconv.Itoa(i))
	}
	send(t, h, "acme", "in", "a1", "a2", "a3", "a4", "a5")
	send(t, h, "default", "transactions",
		`{"id":"tx-1","account":"acme","currency":"EUR","items":[{"sku":"a","quantity":3,"unit_price":2.5}]}`,
		`{"id":"tx-2","account":"acme","currency":"EUR","amount":10}`,
		`{"id":"tx-3","currency":"EUR"}`)
	// The same transactions through the TinyGo build of billing.
	send(t, h, "acme", "transactions",
		`{"id":"tx-1","account":"acme","currency":"EUR","items":[{"sku":"a","quantity":3,"unit_price":2.5}]}`,
		`{"id":"tx-2","account":"acme","currency":"EUR","amount":10}`,
		`{"id":"tx-3","currency":"EUR"}`)

	eventually(t, "all outputs", func() bool {
		return depth(t, h, "default", "out") == 20 && depth(t, h, "acme", "out") == 5 &&
			depth(t, h, "default", "priced") == 2 && depth(t, h, "default", "transactions-poison") == 1 &&
			depth(t, h, "acme", "priced") == 2 && depth(t, h, "acme", "transactions-poison") == 1
	})
	// Counters are bumped after an output is sent and its input deleted: wait for them too.
	eventually(t, "the counters", func() bool {
		return bindingStatus(t, h, "default", "echo").Processed >= 20 && bindingStatus(t, h, "acme", "echo").Processed >= 5 &&
			bindingStatus(t, h, "default", "billing").Processed+bindingStatus(t, h, "default", "billing").Poisoned >= 3 &&
			// The depths shown are the listeners' own, read when they find their queue drained.
			bindingStatus(t, h, "default", "echo").Depth == 0 && bindingStatus(t, h, "default", "billing").DeadLetterDepth == 1
	})
	// Tenants are namespaced: acme's echo read only acme's five messages.
	if s := bindingStatus(t, h, "default", "echo"); s.Processed != 20 || s.Depth != 0 || s.ModuleDigest == "" || s.PhysicalQueue != "in" {
		t.Errorf("default echo status = %+v", s)
	}
	if s := bindingStatus(t, h, "acme", "echo"); s.Processed != 5 || s.PhysicalQueue != "acme.in" {
		t.Errorf("acme echo status = %+v", s)
	}
	if s := bindingStatus(t, h, "default", "billing"); s.Processed != 2 || s.Poisoned != 1 || s.DeadLetterDepth != 1 {
		t.Errorf("billing status = %+v", s)
	}

	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()
	body := get(t, srv.URL+"/metrics", "", http.StatusOK)
	for _, want := range []string{
		`wqhost_messages_processed_total{binding="echo",queue="in",tenant="default"} 20`,
		`wqhost_messages_processed_total{binding="echo",queue="in",tenant="acme"} 5`,
		`wqhost_messages_poisoned_total{binding="billing",queue="transactions",tenant="default"} 1`,
		`wqhost_handler_duration_seconds_count{binding="echo",queue="in",tenant="default"} 20`,
		`wqhost_ready 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !regexp.MustCompile(`wqhost_pool_instances\{binding="echo",queue="in",tenant="default"\} [1-9]`).MatchString(body) {
		t.Errorf("/metrics shows no pool instance for default/echo")
	}
	st := get(t, srv.URL+"/v1/status", "", http.StatusOK)
	for _, want := range []string{`"processed": 20`, `"module_digest": "`, `"queue": "transactions"`, `"poisoned": 1`} {
		if !strings.Contains(st, want) {
			t.Errorf("/v1/status lacks %s", want)
		}
	}

	outs := drainBodies(t, h, "default", "priced")
	if len(outs) != 2 || !strings.Contains(string(outs[0].Body)+string(outs[1].Body), `"total_cents":900`) {
		t.Errorf("priced outputs = %d messages", len(outs))
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestRetryThenOKIsProcessedOnce(t *testing.T) {
	h, _ := newHost(t, fmt.Sprintf(`
  default:
    bindings:
      flaky:
        queue: in
        output: out
        module: %q
%s`, abs(t, flakyWasm), fast))
	stop := run(t, h)
	send(t, h, "default", "in", "retry-once:hello")
	eventually(t, "the output", func() bool { return depth(t, h, "default", "out") == 1 })
	eventually(t, "the input to drain", func() bool { return depth(t, h, "default", "in") == 0 })
	// The counters are bumped after the output is sent and the input deleted, so under load
	// they can trail the queues: wait for them (a second processing would overshoot, and
	// is caught below as well as by the exact counts).
	var s BindingStatus
	eventually(t, "status processed 1 retried 1 failed 1", func() bool {
		s = bindingStatus(t, h, "default", "flaky")
		return s.Processed >= 1 && s.Retried >= 1 && s.Failed >= 1
	})
	if s.Processed != 1 || s.Retried != 1 || s.Failed != 1 || s.Poisoned != 0 {
		t.Errorf("status = processed %d retried %d failed %d poisoned %d; want 1 1 1 0", s.Processed, s.Retried, s.Failed, s.Poisoned)
	}
	outs := drainBodies(t, h, "default", "out")
	if len(outs) != 1 || string(outs[0].Body) != "hello" {
		t.Fatalf("outputs = %v, want one \"hello\"", outs)
	}
	if d := depth(t, h, "default", "in-poison"); d != 0 {
		t.Fatalf("poison depth %d", d)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.OpenQueue(context.Background(), "default", "in"); err == nil {
		t.Fatal("OpenQueue on a stopped host reopened its backend")
	}
}

func TestFailingMessagesEndInPoisonQueueAndRequeue(t *testing.T) {
	h, cfg := newHost(t, fmt.Sprintf(`
  acme:
    bindings:
      guest:
        queue: in
        output: out
        module: %q
%s`, abs(t, "../runtime/testdata/guest/guest.wasm"), fast))
	stop := run(t, h)
	send(t, h, "acme", "in", "trap", "reject:bad input", "emitto:other.out", "ok")
	eventually(t, "three dead letters", func() bool { return depth(t, h, "acme", "in-poison") == 3 })
	eventually(t, "the good output", func() bool { return depth(t, h, "acme", "out") == 1 })
	// A dead letter is sent before its input is deleted and counted: wait for the counters.
	eventually(t, "the counters", func() bool {
		s := bindingStatus(t, h, "acme", "guest")
		return s.Poisoned >= 3 && s.Processed >= 1
	})
	s := bindingStatus(t, h, "acme", "guest")
	if s.Poisoned != 3 || s.Processed != 1 || s.Pool.Traps < 3 {
		t.Errorf("status = %+v", s)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	dls, err := ListDeadLetters(ctx, cfg, "acme", "in", 0)
	if err != nil {
		t.Fatal(err)
	}
	byBody := map[string]DeadLetter{}
	for _, d := range dls {
		byBody[string(d.Body)] = d
	}
	if d := byBody["trap"]; d.DequeueCount != 3 || !strings.Contains(d.Reason, "trapped") || d.OriginalQueue != "acme.in" || d.HandlerVersion == "" {
		t.Errorf("trap dead letter = %+v; want dequeue count 3 (max_dequeue_count) and a trap reason", d)
	}
	if d := byBody["reject:bad input"]; d.DequeueCount != 1 || !strings.Contains(d.Reason, "bad input") {
		t.Errorf("rejected dead letter = %+v; want dead-lettered at once with the guest's text", d)
	}
	// A guest cannot address another tenant's queue: "other.out" is no tenant-local name
	// (ERR_INVALID), the guest rejects.
	if d := byBody["emitto:other.out"]; !strings.Contains(d.Reason, "emit=-5") {
		t.Errorf("cross-tenant emit dead letter = %+v; want emit invalid (-5)", d)
	}

	n, err := RequeueDeadLetters(ctx, cfg, "acme", "in", 0)
	if err != nil || n != 3 {
		t.Fatalf("requeue = %d, %v; want 3", n, err)
	}
	q, closer, err := OpenQueue(ctx, cfg, "acme", "in")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	ms, err := q.Receive(ctx, 32, time.Minute)
	if err != nil || len(ms) != 3 {
		t.Fatalf("requeued messages = %d, %v; want 3", len(ms), err)
	}
	for _, m := range ms {
		if m.DequeueCount != 1 || m.Attributes[queue.AttrReason] != "" {
			t.Errorf("requeued %q: dequeue count %d, attributes %v; want a fresh message", m.Body, m.DequeueCount, m.Attributes)
		}
	}
	if dls, err := ListDeadLetters(ctx, cfg, "acme", "in", 0); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters after requeue = %d, %v", len(dls), err)
	}
}

func TestPurgeDeadLetters(t *testing.T) {
	h, cfg := newHost(t, fmt.Sprintf(`
  default:
    bindings:
      guest: {queue: in, module: %q}
`, abs(t, "../runtime/testdata/guest/guest.wasm")))
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q, closer, err := OpenQueue(ctx, cfg, "default", "in-poison")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := q.Send(ctx, []byte(strconv.Itoa(i)), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	closer.Close()
	if n, err := PurgeDeadLetters(ctx, cfg, "default", "in", 5); err != nil || n != 5 {
		t.Fatalf("purge 5 = %d, %v", n, err)
	}
	if n, err := PurgeDeadLetters(ctx, cfg, "default", "in", 0); err != nil || n != 35 {
		t.Fatalf("purge all = %d, %v", n, err)
	}
}

func TestGracefulShutdownLeavesNothingInvisible(t *testing.T) {
	h, cfg := newHost(t, fmt.Sprintf(`
  default:
    bindings:
      slow:
        queue: in
        output: out
        module: %q
        max_workers: 1
        pool: {min_instances: 2, max_instances: 2}
`, abs(t, flakyWasm)))
	const n = 12
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = "sleep:300"
	}
	send(t, h, "default", "in", bodies...)
	stop := run(t, h)
	eventually(t, "handlers in flight", func() bool { return bindingStatus(t, h, "default", "slow").InFlight > 0 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	ctx := context.Background()
	in, c1, err := OpenQueue(ctx, cfg, "default", "in")
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	out, c2, err := OpenQueue(ctx, cfg, "default", "out")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	left, _ := in.Depth(ctx)
	done, _ := out.Depth(ctx)
	if done == 0 {
		t.Errorf("no handler in flight finished")
	}
	if left+done != n {
		t.Errorf("%d left + %d done != %d sent", left, done, n)
	}
	// Every message still in the queue is visible now: none stays leased by the stopped host.
	var got int64
	for {
		ms, err := in.Receive(ctx, 32, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		got += int64(len(ms))
	}
	if got != left {
		t.Errorf("received %d of %d remaining messages at once; the rest stayed invisible", got, left)
	}
	t.Logf("shutdown: %d finished, %d released", done, left)
}

func TestNotifyUnknownQueue(t *testing.T) {
	h, _ := newHost(t, fmt.Sprintf("  default:\n    bindings:\n      b: {queue: in, module: %q}\n", abs(t, flakyWasm)))
	defer h.Close(context.Background())
	if err := h.Notify("default", "in"); err != nil {
		t.Errorf("notify in: %v", err)
	}
	if err := h.Notify("default", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("notify nope: %v", err)
	}
	if err := h.Notify("ghost", "in"); !errors.Is(err, ErrNotFound) {
		t.Errorf("notify ghost tenant: %v", err)
	}
}

func TestNewFailsWholeOnABadModule(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.wasm")
	if err := os.WriteFile(bad, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := hostConfig(t, "", fmt.Sprintf(`
  default:
    bindings:
      good: {queue: a, module: %q}
      bad: {queue: b, module: %q}
`, abs(t, flakyWasm), bad))
	_, err := New(context.Background(), cfg, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "tenants.default.bindings.bad") {
		t.Fatalf("New = %v; want an error naming the bad binding", err)
	}
}

func TestRunServesAdminAndRejectsOversizedMessages(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
data_dir: %s
cache_dir: %s
admin: {addr: "127.0.0.1:0"}
tenants:
  default:
    limits: {max_message_bytes: 16}
    bindings:
      echo: {queue: in, output: out, module: %q}
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
	send(t, h, "default", "in", "small", strings.Repeat("x", 17))
	do(t, "POST", base+"/v1/tenants/default/queues/in/notify", "", "", 200)
	eventually(t, "one output and one dead letter", func() bool {
		return depth(t, h, "default", "out") == 1 && depth(t, h, "default", "in-poison") == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dls, err := ListDeadLetters(context.Background(), cfg, "default", "in", 0)
	if err != nil || len(dls) != 1 || !strings.Contains(dls[0].Reason, "exceeds max_message_bytes 16") {
		t.Fatalf("dead letters = %+v, %v", dls, err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Errorf("admin server still serving after Run returned")
	}
}
