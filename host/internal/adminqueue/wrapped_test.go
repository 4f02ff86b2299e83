package adminqueue

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestWrappedLocalStoreNotLeased: behind a decorator (a metrics or counting wrapper) the
// local store still answers the listing, get, count, purge and redrive itself, through the
// contract's Scanner and Sweeper: no dead letter is leased (each keeps dequeue count 0),
// where a bare *local.Queue assertion would have sent every one through the leasing scan.
func TestWrappedLocalStoreNotLeased(t *testing.T) {
	ctx := context.Background()
	st, err := local.Open(ctx, filepath.Join(t.TempDir(), "q.db"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rawDead, _ := st.Queue(ctx, "jobs"+queue.PoisonSuffix)
	rawDst, _ := st.Queue(ctx, "jobs")
	dead, dst := queue.Decorator{Queue: rawDead}, queue.Decorator{Queue: rawDst}
	var ids []string
	for i := range 10 {
		reason := "trap"
		if i%2 == 1 {
			reason = "timeout"
		}
		id, err := dead.Send(ctx, fmt.Appendf(nil, "body %d", i), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: reason}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	unleased := func(step string) {
		t.Helper()
		ms, err := rawDead.Peek(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.DequeueCount != 0 {
				t.Fatalf("after %s, dead letter %s has dequeue count %d: it was leased", step, m.ID, m.DequeueCount)
			}
		}
	}
	items, next, err := ListDead(ctx, dead, Query{Limit: 3})
	if err != nil || len(items) != 3 || next == "" || items[0].ID != ids[9] {
		t.Fatalf("list = %d items (first %v), next %q, %v; want the 3 newest and a cursor", len(items), items, next, err)
	}
	unleased("a listing")
	if it, ok, err := GetDead(ctx, dead, ids[4], 4); err != nil || !ok || *it.Body != "body" || it.Size != 6 {
		t.Fatalf("get = %+v, %v, %v; want body 4 cut to 4 bytes", it, ok, err)
	}
	unleased("a get")
	if n, err := CountDead(ctx, dead, Filter{Reason: "timeout"}); err != nil || n != 5 {
		t.Fatalf("count = %d, %v; want 5", n, err)
	}
	unleased("a count")
	if n, err := PurgeDead(ctx, dead, Filter{Reason: "timeout"}, 5, 0); err != nil || n != 5 {
		t.Fatalf("purge = %d, %v; want 5", n, err)
	}
	unleased("a purge")
	var p Progress
	if err := RedriveDead(ctx, dead, dst, Filter{}, MaxRate, 0, &p); err != nil || p.Done.Load() != 5 {
		t.Fatalf("redrive = %d done, %v; want 5", p.Done.Load(), err)
	}
	moved, _ := rawDst.Peek(ctx, 0)
	if len(moved) != 5 || moved[0].DequeueCount != 0 || moved[0].Attributes[queue.AttrReason] != "" {
		t.Fatalf("redriven: %d messages (%+v); want 5, fresh, bookkeeping dropped", len(moved), moved)
	}
}
