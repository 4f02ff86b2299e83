package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestAdminQueueEndpointsOnAHost: a host's admin API sends to and peeks at its tenants'
// queues on its own store, lists and counts their dead letters and runs redrive jobs, each
// only for its own tenant's token (the endpoints are tested in depth in host/admin).
func TestAdminQueueEndpointsOnAHost(t *testing.T) {
	u := twoTenantAdmin(t, "")
	base := u + "/v1/tenants/acme/queues/in"
	out := do(t, "POST", base+"/messages", "acme-secret", "hello", 200)
	if !strings.Contains(out, `"sent": 1`) {
		t.Fatalf("send answered %s", out)
	}
	do(t, "POST", base+"/messages", "beta-secret", "hello", 403)
	peek := get(t, base+"/messages?limit=5", "acme-secret", 200)
	if !strings.Contains(peek, `"body": "hello"`) {
		t.Errorf("peek shows %s, want the message sent", peek)
	}
	get(t, base+"/deadletters", "beta-secret", 403)
	if got := get(t, base+"/deadletters", "acme-secret", 200); !strings.Contains(got, `"items": []`) {
		t.Errorf("dead letters of a fresh queue: %s", got)
	}
	if got := do(t, "POST", base+"/deadletters/count", "acme-secret", `{"filter":{"reason":"x"}}`, 200); !strings.Contains(got, `"count": 0`) {
		t.Errorf("count: %s", got)
	}
	var j struct{ Job string }
	if err := json.Unmarshal([]byte(do(t, "POST", base+"/deadletters/redrive", "acme-secret", `{}`, 202)), &j); err != nil {
		t.Fatal(err)
	}
	get(t, u+"/v1/jobs/"+j.Job, "beta-secret", 404)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(get(t, u+"/v1/jobs/"+j.Job, "acme-secret", 200), `"state": "done"`) {
		if time.Now().After(deadline) {
			t.Fatal("redrive of an empty dead-letter queue not done after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	do(t, "POST", base+"/messages", "host-secret", `{"messages":[{"body":"x"}]}`, 200)
	get(t, u+"/v1/tenants/acme/queues/in-poison/deadletters", "acme-secret", 400)
}

// TestAdminPurgeAndRedriveRefreshDepths: right after a purge, and once a redrive job reads
// done, the binding's status shows the queue's and the dead-letter queue's depths read
// afresh, not the ones its listener read before.
func TestAdminPurgeAndRedriveRefreshDepths(t *testing.T) {
	t.Setenv("TEST_WQ_HOST_TOKEN", "host-secret")
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
data_dir: %s
cache_dir: %s
admin: {addr: "off", token_env: TEST_WQ_HOST_TOKEN}
tenants:
  acme:
    bindings:
      a: {queue: in, module: %q}
`, filepath.Join(dir, "data"), cacheDir, abs(t, flakyWasm))), dir)
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
	ctx := context.Background()
	dead, err := h.OpenQueue(ctx, "acme", "in-poison")
	if err != nil {
		t.Fatal(err)
	}
	if want := queue.CapScan | queue.CapSweep; queue.Of(dead)&want != want {
		// adminqueue filters in the store only through these; without them every
		// dead-letter query is a scan that leases the whole queue.
		t.Fatalf("the host's local dead-letter queue (%T) has capabilities %s, want scan and sweep", dead, queue.Of(dead))
	}
	for _, reason := range []string{"trap", "trap", "timeout"} {
		if _, err := dead.Send(ctx, []byte("m"), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: reason}}); err != nil {
			t.Fatal(err)
		}
	}
	depths := func() (int64, int64) {
		t.Helper()
		var st Status
		if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/status", "host-secret", 200)), &st); err != nil {
			t.Fatal(err)
		}
		b := st.Tenants[0].Bindings[0]
		return b.Depth, b.DeadLetterDepth
	}
	base := srv.URL + "/v1/tenants/acme/queues/in/deadletters"
	do(t, "POST", base+"/purge", "host-secret", `{"filter":{"reason":"timeout"},"expect":1}`, 200)
	if d, dl := depths(); d != 0 || dl != 2 {
		t.Errorf("after purging 1 of 3 dead letters: depth %d, dead-letter depth %d; want 0 and 2", d, dl)
	}
	var j struct{ Job string }
	if err := json.Unmarshal([]byte(do(t, "POST", base+"/redrive", "host-secret", `{}`, 202)), &j); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(get(t, srv.URL+"/v1/jobs/"+j.Job, "host-secret", 200), `"state": "done"`) {
		if time.Now().After(deadline) {
			t.Fatal("redrive not done after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d, dl := depths(); d != 2 || dl != 0 {
		t.Errorf("after redriving 2: depth %d, dead-letter depth %d; want 2 and 0", d, dl)
	}
}
