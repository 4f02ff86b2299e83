package adminqueue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestDeadLettersWithoutSQL: on a backend without SQL (memory, with its queue.Scanner and
// with it hidden so that every operation leases) the listing pages newest first through
// every matching dead letter once, the count, purge and redrive select what the filter
// says (the time from wqhost.dead_lettered_at), and every dead letter left is released,
// visible again, when each ends.
func TestDeadLettersWithoutSQL(t *testing.T) {
	t.Run("scanner", func(t *testing.T) { testDeadLettersWithoutSQL(t, false) })
	t.Run("leasing", func(t *testing.T) { testDeadLettersWithoutSQL(t, true) })
}

// noScan hides its queue's Scanner and Sweeper.
type noScan struct{ queue.Decorator }

func (n noScan) Capabilities() queue.Caps {
	return n.Decorator.Capabilities() &^ (queue.CapScan | queue.CapSweep)
}

func testDeadLettersWithoutSQL(t *testing.T, hide bool) {
	ctx := context.Background()
	be := memory.New(memory.Options{})
	dst, _ := be.Queue(ctx, "jobs")
	mdead, _ := be.Queue(ctx, "jobs"+queue.PoisonSuffix)
	var dead queue.Queue = mdead
	if hide {
		dead = noScan{queue.Decorator{Queue: mdead}}
	}
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for i := range 40 {
		reason := "trap"
		if i%4 == 0 {
			reason = "timeout"
		}
		if _, err := dead.Send(ctx, fmt.Appendf(nil, "body %d", i), queue.SendOptions{Attributes: map[string]string{
			queue.AttrReason: reason, queue.AttrDeadLetteredAt: t0.Add(time.Duration(i) * time.Minute).Format(time.RFC3339Nano),
			queue.AttrHandlerVersion: "v1", "user": "u",
		}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after := ""
	for range 20 {
		items, next, err := ListDead(ctx, dead, Query{Filter: Filter{Reason: "trap"}, Limit: 7, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			got = append(got, *it.Body)
		}
		if next == "" {
			break
		}
		after = next
	}
	if len(got) != 30 || got[0] != "body 39" || got[29] != "body 1" {
		t.Fatalf("listed %d (%v...), want the 30 traps newest first", len(got), got[:min(3, len(got))])
	}
	for _, c := range []struct {
		f    Filter
		want int64
	}{
		{Filter{}, 40}, {Filter{Reason: "timeout"}, 10}, {Filter{Body: "body 3"}, 11},
		{Filter{Since: t0.Add(30 * time.Minute)}, 10}, {Filter{Version: "v2"}, 0},
	} {
		if n, err := CountDead(ctx, dead, c.f); err != nil || n != c.want {
			t.Errorf("count %+v = %d, %v; want %d", c.f, n, err, c.want)
		}
	}
	if _, err := PurgeDead(ctx, dead, Filter{Reason: "timeout"}, 9, 0); err == nil || !strings.Contains(err.Error(), "10 dead letters") {
		t.Errorf("purge with a stale count: %v, want refused naming the count 10", err)
	}
	if n, err := PurgeDead(ctx, dead, Filter{Reason: "timeout"}, 10, 0); err != nil || n != 10 {
		t.Errorf("purge = %d, %v; want 10", n, err)
	}
	var p Progress
	if err := RedriveDead(ctx, dead, dst, Filter{Since: t0.Add(30 * time.Minute)}, MaxRate, 0, &p); err != nil {
		t.Fatal(err)
	}
	if p.Matched.Load() != 8 || p.Done.Load() != 8 || p.Failed.Load() != 0 { // 30..39 less the timeouts 32, 36, purged
		t.Errorf("redrive matched %d done %d failed %d, want 8, 8, 0", p.Matched.Load(), p.Done.Load(), p.Failed.Load())
	}
	moved, _ := dst.Peek(ctx, 0)
	for _, m := range moved {
		if m.Attributes["user"] != "u" || m.Attributes[queue.AttrReason] != "" {
			t.Errorf("redriven %s attributes %v: want the user's kept, the bookkeeping dropped", m.ID, m.Attributes)
		}
	}
	left, _ := mdead.Peek(ctx, 0)
	for _, m := range left {
		if m.VisibleAt.After(time.Now()) {
			t.Errorf("dead letter %s still leased after the scans", m.ID)
		}
	}
	if len(moved) != 8 || len(left) != 22 {
		t.Errorf("%d in the queue and %d dead letters left, want 8 and 22", len(moved), len(left))
	}
}
