package queuetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// scanned is one message as a scan listed it.
type scanned struct {
	m    *queue.Message
	size int64
}

// scanAll pages through q with o (o.After is the start) and fails on a page above o.Limit or
// a repeated id; it returns every message listed, in order.
func scanAll(t *testing.T, s queue.Scanner, o queue.ScanOptions) []scanned {
	t.Helper()
	var out []scanned
	seen := map[string]bool{}
	for range 1000 {
		var page int
		next, err := s.Scan(context.Background(), o, func(m *queue.Message, size int64) error {
			if seen[m.ID] {
				return fmt.Errorf("message %s listed twice (cursor %q)", m.ID, o.After)
			}
			seen[m.ID] = true
			page++
			out = append(out, scanned{m, size})
			return nil
		})
		if err != nil {
			t.Fatalf("Scan %+v: %v", o, err)
		}
		if o.Limit > 0 && page > o.Limit {
			t.Fatalf("Scan with Limit %d listed %d", o.Limit, page)
		}
		if next == "" {
			return out
		}
		if page == 0 {
			t.Fatalf("Scan listed nothing but gave cursor %q", next)
		}
		o.After = next
	}
	t.Fatal("Scan gave cursors for 1000 pages")
	return nil
}

func ids(ms []scanned) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.m.ID
	}
	return out
}

// testScanner: pages of every size walk the whole queue once in one order (backwards with
// Newest), cursors resume with no gap or repeat, the filter selects what Filter.Matches
// says and CountMatching counts it, bodies are cut to BodyBytes with their whole size, a
// foreign cursor is ErrBadCursor, and scanning leases nothing, while leased messages are
// listed too.
func testScanner(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "scan")
	s, _ := queue.As[queue.Scanner](q)
	const n = 23
	sent := map[string]string{}
	for i := range n {
		if i == n/2 && advance != nil {
			advance(time.Minute) // two send times, for the time bounds
		}
		reason, version := "trap: out of bounds", "v1"
		if i%3 == 0 {
			reason = "timeout"
		}
		if i%2 == 0 {
			version = "v2"
		}
		body := fmt.Sprintf("message %02d", i)
		sent[send(t, q, []byte(body), queue.SendOptions{Attributes: map[string]string{
			queue.AttrReason: reason, queue.AttrHandlerVersion: version}})] = body
	}
	leased := receiveOne(t, q, time.Hour)

	all := scanAll(t, s, queue.ScanOptions{BodyBytes: 1 << 20})
	if len(all) != n {
		t.Fatalf("Scan listed %d messages, want %d (the leased one too)", len(all), n)
	}
	for _, x := range all {
		if sent[x.m.ID] != string(x.m.Body) || x.size != int64(len(x.m.Body)) {
			t.Fatalf("Scan listed %s as %q (size %d), sent %q", x.m.ID, x.m.Body, x.size, sent[x.m.ID])
		}
	}
	order := ids(all)
	for _, limit := range []int{1, 5, n - 1, n, n + 1} {
		if got := ids(scanAll(t, s, queue.ScanOptions{Limit: limit})); !slices.Equal(got, order) {
			t.Fatalf("pages of %d list %v, one scan %v", limit, got, order)
		}
		got := ids(scanAll(t, s, queue.ScanOptions{Limit: limit, Newest: true}))
		slices.Reverse(got)
		if !slices.Equal(got, order) {
			t.Fatalf("newest-first pages of %d list %v backwards, one scan %v", limit, got, order)
		}
	}

	filters := []queue.Filter{
		{Attrs: []queue.AttrFilter{{Key: queue.AttrReason, Value: "trap", Contains: true}}},
		{Attrs: []queue.AttrFilter{{Key: queue.AttrHandlerVersion, Value: "v1"}, {Key: queue.AttrReason, Value: "timeout"}}},
		{Attrs: []queue.AttrFilter{{Key: queue.AttrHandlerVersion, Value: "v"}}},
		{Attrs: []queue.AttrFilter{{Key: "missing", Value: "", Contains: true}}},
		{Body: []byte("message 1")},
		{ID: leased.ID},
		{ID: "no such id"},
		{To: all[0].m.InsertedAt.Add(-time.Hour)},
		{From: all[0].m.InsertedAt.Add(-time.Hour)},
	}
	if advance != nil {
		last := all[0].m.InsertedAt
		for _, x := range all {
			if x.m.InsertedAt.After(last) {
				last = x.m.InsertedAt
			}
		}
		filters = append(filters, queue.Filter{From: last}, queue.Filter{To: last})
	}
	for _, f := range filters {
		var want []string
		for _, x := range all {
			if f.Matches(x.m) {
				want = append(want, x.m.ID)
			}
		}
		if got := ids(scanAll(t, s, queue.ScanOptions{Filter: f, Limit: 4})); !slices.Equal(got, want) {
			t.Errorf("Scan with filter %+v listed %v, want %v", f, got, want)
		}
		if c, err := s.CountMatching(ctx, f); err != nil || c != int64(len(want)) {
			t.Errorf("CountMatching %+v = %d, %v; want %d", f, c, err, len(want))
		}
	}

	for _, x := range scanAll(t, s, queue.ScanOptions{BodyBytes: 3}) {
		if string(x.m.Body) != sent[x.m.ID][:3] || x.size != int64(len(sent[x.m.ID])) {
			t.Fatalf("Scan with BodyBytes 3 listed %s as %q size %d", x.m.ID, x.m.Body, x.size)
		}
	}
	if _, err := s.Scan(ctx, queue.ScanOptions{After: "not a cursor"}, func(*queue.Message, int64) error { return nil }); !errors.Is(err, queue.ErrBadCursor) {
		t.Errorf("Scan after a foreign cursor = %v, want ErrBadCursor", err)
	}
	stop := errors.New("stop")
	if _, err := s.Scan(ctx, queue.ScanOptions{}, func(*queue.Message, int64) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Scan whose fn failed = %v, want that error", err)
	}
	got := receive(t, q, queue.MaxBatch, time.Minute)
	if len(got) != n-1 {
		t.Fatalf("after the scans, Receive got %d of %d", len(got), n-1)
	}
	for _, m := range got {
		if m.DequeueCount != 1 {
			t.Fatalf("message %s dequeue count %d after scans, want 1", m.ID, m.DequeueCount)
		}
	}
}

// testSweeper: a sweep deletes what its filter selected when it started, in chunks of at
// most the size asked, leaves a leased message and one sent after it started; a move
// carries bodies and attributes (less the dropped keys) to a queue of the store, decorated
// or not, as new messages, and refuses a queue it does not know as its own.
func testSweeper(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q, dst := open(t, b, "sweep"), open(t, b, "sweep-dst")
	sw, _ := queue.As[queue.Sweeper](q)
	for i := range 10 {
		reason := "trap"
		if i%2 == 1 {
			reason = "timeout"
		}
		send(t, q, fmt.Appendf(nil, "m%d", i), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: reason, "user": "u"}})
	}
	traps := queue.Filter{Attrs: []queue.AttrFilter{{Key: queue.AttrReason, Value: "trap"}}}
	walk, n, err := sw.Sweep(ctx, traps)
	if err != nil || n != 5 {
		t.Fatalf("Sweep(traps) = %d, %v; want 5", n, err)
	}
	send(t, q, []byte("late"), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: "trap"}})
	held := receiveOne(t, q, time.Hour) // m0, a trap
	var found, deleted int
	for range 20 {
		f, d, err := walk.Delete(ctx, 2)
		if err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if f > 2 {
			t.Fatalf("Delete(2) found %d", f)
		}
		if f == 0 {
			break
		}
		found, deleted = found+f, deleted+d
	}
	if found != 5 || deleted != 4 {
		t.Fatalf("the sweep found %d and deleted %d, want 5 and 4 (the leased trap left)", found, deleted)
	}
	if err := q.UpdateVisibility(ctx, held, 0); err != nil {
		t.Fatal(err)
	}
	// Left: 5 timeouts, the late trap, the released m0.
	walk, n, err = sw.Sweep(ctx, queue.Filter{})
	if err != nil || n != 7 {
		t.Fatalf("Sweep(all) = %d, %v; want 7", n, err)
	}
	if _, _, err := walk.MoveTo(ctx, 100, foreign{dst}, nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("MoveTo a queue the store does not know = %v, want errors.ErrUnsupported", err)
	}
	var moved int
	for range 20 {
		f, m, err := walk.MoveTo(ctx, 100, queue.Decorator{Queue: dst}, []string{queue.AttrReason})
		if err != nil {
			t.Fatalf("MoveTo: %v", err)
		}
		if f == 0 {
			break
		}
		moved += m
	}
	if moved != 7 {
		t.Fatalf("the sweep moved %d, want 7", moved)
	}
	expectEmpty(t, q)
	got := receive(t, dst, queue.MaxBatch, time.Minute)
	if len(got) != 7 {
		t.Fatalf("%s holds %d messages, want 7", dst.Name(), len(got))
	}
	for _, m := range got {
		if m.DequeueCount != 1 || m.Attributes[queue.AttrReason] != "" || string(m.Body) != "late" && m.Attributes["user"] != "u" {
			t.Fatalf("moved message %q: dequeue count %d, attributes %v", m.Body, m.DequeueCount, m.Attributes)
		}
	}
}

// foreign hides a queue behind a wrapper that does not unwrap.
type foreign struct{ queue.Queue }
