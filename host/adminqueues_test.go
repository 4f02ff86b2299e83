package host

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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
