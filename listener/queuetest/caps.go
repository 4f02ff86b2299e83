package queuetest

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// testBodyLimiter: a body above the limit is leased with Body nil and Oversize set; one at
// the limit is loaded.
func testBodyLimiter(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q := open(t, b, "bodylimit")
	bl, _ := queue.As[queue.BodyLimiter](q)
	send(t, q, bytes.Repeat([]byte("a"), 100), queue.SendOptions{})
	send(t, q, bytes.Repeat([]byte("b"), 1000), queue.SendOptions{})
	got := map[byte]*queue.Message{}
	for range 10 {
		ms, err := bl.ReceiveLimited(context.Background(), queue.MaxBatch, time.Minute, 100)
		if err != nil {
			t.Fatalf("ReceiveLimited: %v", err)
		}
		for _, m := range ms {
			if len(m.Body) > 0 {
				got[m.Body[0]] = m
			} else {
				got['b'] = m
			}
		}
		if len(got) == 2 {
			break
		}
	}
	if m := got['a']; m == nil || len(m.Body) != 100 || m.Oversize != 0 {
		t.Fatalf("body at the limit: %+v, want it loaded", m)
	}
	if m := got['b']; m == nil || m.Body != nil || m.Oversize != 1000 {
		t.Fatalf("body above the limit: %+v, want Body nil and Oversize 1000", m)
	}
}

// testMover: MoveTo sends the body with its attributes to dst and deletes the original in
// one step; a stale lease moves nothing.
func testMover(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q, dl := open(t, b, "mover"), open(t, b, "mover"+queue.PoisonSuffix)
	mv, _ := queue.As[queue.Mover](q)
	send(t, q, []byte("poison"), queue.SendOptions{})
	m := receiveOne(t, q, time.Minute)
	stale := *m
	if err := q.UpdateVisibility(ctx, m, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := mv.MoveTo(ctx, &stale, dl, m.Body, queue.SendOptions{}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("MoveTo with a stale lease = %v, want ErrLeaseLost", err)
	}
	if d, _ := dl.Depth(ctx); d != 0 {
		t.Fatalf("a refused move left %d dead letters", d)
	}
	attrs := map[string]string{queue.AttrReason: "bad"}
	if err := mv.MoveTo(ctx, m, dl, m.Body, queue.SendOptions{Attributes: attrs}); err != nil {
		t.Fatalf("MoveTo: %v", err)
	}
	expectEmpty(t, q)
	d := receiveOne(t, dl, time.Minute)
	if string(d.Body) != "poison" || d.Attributes[queue.AttrReason] != "bad" {
		t.Fatalf("moved message %q attrs %v", d.Body, d.Attributes)
	}
}

// testRenewer: Renew extends a lease past its first expiry; a stale token is refused.
func testRenewer(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "renewer")
	r, _ := queue.As[queue.Renewer](q)
	send(t, q, []byte("x"), queue.SendOptions{})
	m := receiveOne(t, q, 10*time.Second)
	stale := *m
	if err := r.Renew(ctx, m, time.Minute); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := r.Renew(ctx, &stale, time.Minute); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("Renew with a stale token = %v, want ErrLeaseLost", err)
	}
	advance(30 * time.Second)
	expectEmpty(t, q)
	if err := q.Delete(ctx, m); err != nil {
		t.Fatalf("Delete after renewal: %v", err)
	}
}

func sendGroup(t *testing.T, q queue.Queue, body string, group int) {
	t.Helper()
	send(t, q, []byte(body), queue.SendOptions{Attributes: map[string]string{queue.AttrOrderKey: strconv.Itoa(group)}})
}

// testOrderedGroups: the lowest group is leased alone; the next only once it is settled.
func testOrderedGroups(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "ordered")
	r, _ := queue.As[queue.OrderedReceiver](q)
	sendGroup(t, q, "g2", 2)
	sendGroup(t, q, "g1-a", 1)
	sendGroup(t, q, "g1-b", 1)
	ms, _, err := r.ReceiveOrdered(ctx, queue.MaxBatch, time.Minute, 0)
	if err != nil || len(ms) != 2 {
		t.Fatalf("ReceiveOrdered = %d messages, %v; want group 1's 2", len(ms), err)
	}
	for _, m := range ms {
		if !strings.HasPrefix(string(m.Body), "g1") {
			t.Fatalf("group 1's receive returned %q", m.Body)
		}
	}
	if more, _, _ := r.ReceiveOrdered(ctx, queue.MaxBatch, time.Minute, 0); len(more) != 0 {
		t.Fatalf("group 2 received while group 1 is leased: %q", more[0].Body)
	}
	for _, m := range ms {
		if err := q.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ms, _, err = r.ReceiveOrdered(ctx, queue.MaxBatch, time.Minute, 0)
	if err != nil || len(ms) != 1 || string(ms[0].Body) != "g2" {
		t.Fatalf("after group 1: %d messages, %v; want g2", len(ms), err)
	}
}

// testOrderedOversize: an ordered receive leaves a body above its limit unread.
func testOrderedOversize(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q := open(t, b, "ordered-big")
	r, _ := queue.As[queue.OrderedReceiver](q)
	sendGroup(t, q, strings.Repeat("x", 1000), 1)
	ms, _, err := r.ReceiveOrdered(context.Background(), 1, time.Minute, 100)
	if err != nil || len(ms) != 1 {
		t.Fatalf("ReceiveOrdered = %d, %v", len(ms), err)
	}
	if ms[0].Body != nil || ms[0].Oversize != 1000 {
		t.Fatalf("oversize ordered message loaded: %d bytes, Oversize %d", len(ms[0].Body), ms[0].Oversize)
	}
}

// testPeek: Peek shows messages without leasing them or counting a dequeue.
func testPeek(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q := open(t, b, "peek")
	p, _ := queue.As[queue.Peeker](q)
	for _, s := range []string{"a", "b", "c"} {
		send(t, q, []byte(s), queue.SendOptions{})
	}
	ms, err := p.Peek(context.Background(), 0)
	if err != nil || len(ms) != 3 {
		t.Fatalf("Peek = %d messages, %v; want 3", len(ms), err)
	}
	got := receive(t, q, queue.MaxBatch, time.Minute)
	if len(got) != 3 {
		t.Fatalf("after Peek, Receive got %d of 3", len(got))
	}
	for _, m := range got {
		if m.DequeueCount != 1 {
			t.Fatalf("message %s dequeue count %d after a peek, want 1", m.ID, m.DequeueCount)
		}
	}
}

// testCounts: the depth splits into visible, leased and delayed.
func testCounts(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "counts")
	c, _ := queue.As[queue.Counter](q)
	send(t, q, []byte("leased"), queue.SendOptions{})
	receiveOne(t, q, time.Minute)
	send(t, q, []byte("visible"), queue.SendOptions{})
	send(t, q, []byte("delayed"), queue.SendOptions{Delay: time.Minute})
	send(t, q, []byte("delayed"), queue.SendOptions{Delay: time.Minute})
	got, err := c.Counts(ctx)
	if want := (queue.Counts{Visible: 1, Leased: 1, Delayed: 2}); err != nil || got != want {
		t.Fatalf("Counts = %+v, %v; want %+v", got, err, want)
	}
	advance(2 * time.Minute)
	if got, err = c.Counts(ctx); err != nil || got != (queue.Counts{Visible: 4}) {
		t.Fatalf("after the lease and delays: Counts = %+v, %v; want 4 visible", got, err)
	}
}

// testMaxBytes: a body of the reported limit is accepted and comes back whole.
func testMaxBytes(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q := open(t, b, "maxbytes")
	l, _ := queue.As[queue.MessageLimiter](q)
	n := l.MaxMessageBytes()
	if n <= 0 {
		t.Skipf("MaxMessageBytes = %d: no limit known", n)
	}
	// A store's large limit (local: 64 MiB) is its own tests' to prove; a body of up to
	// 1 MiB of it is sent here, which covers the service limits (Azure: 48 KiB raw).
	body := bytes.Repeat([]byte{0xa5}, min(n, 1<<20))
	send(t, q, body, queue.SendOptions{})
	if m := receiveOne(t, q, time.Minute); !bytes.Equal(m.Body, body) {
		t.Fatalf("a body of %d bytes (MaxMessageBytes %d) came back as %d bytes", len(body), n, len(m.Body))
	}
}

// testPurge: receiving and deleting every message empties the queue (poison purge).
func testPurge(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "purge")
	for i := range 40 {
		send(t, q, []byte{byte(i)}, queue.SendOptions{})
	}
	for n := 0; n < 40; {
		ms := receive(t, q, queue.MaxBatch, time.Minute)
		if len(ms) == 0 {
			t.Fatalf("purge stalled after %d of 40", n)
		}
		for _, m := range ms {
			if err := q.Delete(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		n += len(ms)
	}
	if d, err := q.Depth(ctx); err != nil || d != 0 {
		t.Fatalf("Depth after purge = %d, %v", d, err)
	}
}

// testRequeue: a dead letter sent back to its queue keeps its body and can be handled.
func testRequeue(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q, dl := open(t, b, "requeue"), open(t, b, "requeue"+queue.PoisonSuffix)
	send(t, dl, []byte("again"), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: "r"}})
	d := receiveOne(t, dl, time.Minute)
	send(t, q, d.Body, queue.SendOptions{})
	if err := dl.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	if m := receiveOne(t, q, time.Minute); string(m.Body) != "again" || m.DequeueCount != 1 {
		t.Fatalf("requeued %q with dequeue count %d", m.Body, m.DequeueCount)
	}
	expectEmpty(t, dl)
}
