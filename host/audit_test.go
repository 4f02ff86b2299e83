package host

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

// auditHost is a host with a host token and acme's own token, logging into out.
func auditHost(t *testing.T, out *lockedBuffer, binding string) (*Host, string) {
	t.Helper()
	t.Setenv("TEST_WQ_HOST_TOKEN", "host-secret")
	t.Setenv("TEST_WQ_ACME_TOKEN", "acme-secret")
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
data_dir: %s
cache_dir: %s
admin: {addr: "off", token_env: TEST_WQ_HOST_TOKEN}
tenants:
  acme:
    token_env: TEST_WQ_ACME_TOKEN
    bindings:
      %s
`, filepath.Join(dir, "data"), cacheDir, binding)), dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), cfg, slog.New(slog.NewTextHandler(out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	srv := httptest.NewServer(h.AdminHandler())
	t.Cleanup(srv.Close)
	return h, srv.URL
}

// TestAdminAuditLog: every state-changing request logs one "admin action" line with the
// actor (the token's principal), the action, its target and its count.
func TestAdminAuditLog(t *testing.T) {
	var out lockedBuffer
	h, base := auditHost(t, &out, fmt.Sprintf("a: {queue: in, module: %q}", abs(t, flakyWasm)))
	ctx := context.Background()
	dead, err := h.OpenQueue(ctx, "acme", "in-poison")
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"trap", "trap", "timeout"} {
		if _, err := dead.Send(ctx, []byte("m"), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: reason}}); err != nil {
			t.Fatal(err)
		}
	}
	q := base + "/v1/tenants/acme/queues/in"
	do(t, "POST", q+"/messages", "acme-secret", `{"messages":[{"body":"x"},{"body":"y"}]}`, 200)
	do(t, "POST", q+"/deadletters/purge", "acme-secret", `{"filter":{"reason":"timeout"},"expect":1}`, 200)
	var j struct{ Job string }
	if err := json.Unmarshal([]byte(do(t, "POST", q+"/deadletters/redrive", "host-secret", `{"expect":2}`, 202)), &j); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(get(t, base+"/v1/jobs/"+j.Job, "host-secret", 200), `"state": "done"`) {
		if time.Now().After(deadline) {
			t.Fatal("redrive not done after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	do(t, "DELETE", base+"/v1/jobs/"+j.Job, "acme-secret", "", 200)
	do(t, "POST", base+"/v1/reload", "host-secret", "", 200)

	for _, want := range []string{
		"actor=tenant/acme action=send target=acme/in count=1",
		`actor=tenant/acme action=purge-dead-letters target=acme/in count=1 remote=127.0.0.1`,
		`filter="{\"reason\":\"timeout\"}"`,
		"actor=host action=redrive-dead-letters target=acme/in count=2 remote=127.0.0.1",
		"job=" + j.Job + " filter={}",
		`msg="admin action finished" actor=host action=redrive-dead-letters target=acme/in count=2 failed=0 matched=2`,
		"actor=tenant/acme action=cancel-job target=" + j.Job + " count=2",
		"actor=host action=reload target=\"config and modules\" count=0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no audit line with %q in:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), `msg="admin action"`); n != 5 {
		t.Errorf("%d admin action lines, want 5 (send, purge, redrive, cancel, reload):\n%s", n, out.String())
	}
}

// TestPoisonedMessageLogsOneLine: a message the handler rejects is dead-lettered with one
// WARN line naming it and the reason, not one from the host and one from the listener.
func TestPoisonedMessageLogsOneLine(t *testing.T) {
	var out lockedBuffer
	h, _ := auditHost(t, &out, "bill: {queue: in, output: out, module: builtin:billing-go}")
	stop := run(t, h)
	defer func() { _ = stop() }()
	q, err := h.OpenQueue(context.Background(), "acme", "in")
	if err != nil {
		t.Fatal(err)
	}
	id, err := q.Send(context.Background(), []byte("not a transaction"), queue.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the message dead-lettered", func() bool { return strings.Contains(out.String(), "message dead-lettered") })
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "level=WARN") && strings.Contains(l, "id="+id) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "reason=") {
		t.Errorf("%d WARN lines for the poisoned message %s, want one with its reason:\n%s", len(lines), id, strings.Join(lines, "\n"))
	}
}
