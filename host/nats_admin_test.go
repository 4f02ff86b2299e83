package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/wqhost/wqhost/listener/queue"
)

// TestNATSDeadLettersThroughAdminAPI: the admin API's dead-letter endpoints (list, dry-run
// count, purge confirmed by that count) work on a nats binding's poison stream as on the
// other backends, through the generic scan (docs/admin-api.md).
func TestNATSDeadLettersThroughAdminAPI(t *testing.T) {
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	top := natsBackend(t)
	h, cfg := newHostWith(t, top, "  acme:\n    bindings:\n      echo:\n        queue: in\n        backend: js\n        module: \""+echo+"\""+fast)
	ctx := context.Background()
	in, closer, err := OpenQueue(ctx, cfg, "acme", "in")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	const n = 4
	for i := range n {
		if _, err := in.Send(ctx, fmt.Appendf(nil, "not json %d", i), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, h)
	srv := httptest.NewServer(h.AdminHandler())
	t.Cleanup(srv.Close)
	base := srv.URL + "/v1/tenants/acme/queues/in/deadletters"
	var list struct {
		Items []struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		} `json:"items"`
	}
	eventually(t, fmt.Sprintf("%d dead letters listed through the admin API", n), func() bool {
		list.Items = nil
		return json.Unmarshal([]byte(get(t, base+"?limit=100", "", 200)), &list) == nil && len(list.Items) == n
	})
	for _, it := range list.Items {
		if it.ID == "" || it.Reason == "" {
			t.Errorf("dead letter listed without id or reason: %+v", it)
		}
	}
	var count struct{ Count int }
	if err := json.Unmarshal([]byte(do(t, "POST", base+"/count", "", `{"filter":{"body":"not json"}}`, 200)), &count); err != nil || count.Count != n {
		t.Fatalf("dry-run count = %d (%v), want %d", count.Count, err, n)
	}
	do(t, "POST", base+"/purge", "", fmt.Sprintf(`{"filter":{"body":"not json"},"expect":%d}`, n+1), 409)
	var purged struct{ Purged int }
	if err := json.Unmarshal([]byte(do(t, "POST", base+"/purge", "", fmt.Sprintf(`{"filter":{"body":"not json"},"expect":%d}`, n), 200)), &purged); err != nil || purged.Purged != n {
		t.Fatalf("purge = %d (%v), want %d", purged.Purged, err, n)
	}
	dead, dcloser, err := OpenQueue(ctx, cfg, "acme", "in"+queue.PoisonSuffix)
	if err != nil {
		t.Fatal(err)
	}
	defer dcloser.Close()
	eventually(t, "the poison stream empty after the purge", func() bool {
		d, err := dead.Depth(ctx)
		return err == nil && d == 0
	})
}
