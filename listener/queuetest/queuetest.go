// Package queuetest is the conformance suite of the queue contract (listener/queue). Every
// backend (memory, local, azure) and wrapper (sharded over each) runs it through Run, so that
// a binding behaves the same on all of them; a new backend is done when it passes. Each
// optional capability either passes its own cases or is absent, and the listener's fallback
// for it is tested either way (with the capability hidden where the backend has it).
package queuetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// holds reports whether m.Queue names q or, behind a wrapper, one of its physical queues
// (name-<shard>).
func holds(q queue.Queue, m *queue.Message) bool {
	return m.Queue == q.Name() || strings.HasPrefix(m.Queue, q.Name()+"-")
}

func open(t *testing.T, b queue.Backend, name string) queue.Queue {
	t.Helper()
	q, err := b.Open(context.Background(), name)
	if err != nil {
		t.Fatalf("Open(%q): %v", name, err)
	}
	if q.Name() != name {
		t.Fatalf("Name() = %q, want %q", q.Name(), name)
	}
	return q
}

func send(t *testing.T, q queue.Queue, body []byte, opts queue.SendOptions) string {
	t.Helper()
	id, err := q.Send(context.Background(), body, opts)
	if err != nil {
		t.Fatalf("Send to %s: %v", q.Name(), err)
	}
	if id == "" {
		t.Fatalf("Send to %s returned an empty id", q.Name())
	}
	return id
}

func receive(t *testing.T, q queue.Queue, max int, vis time.Duration) []*queue.Message {
	t.Helper()
	ms, err := q.Receive(context.Background(), max, vis)
	if err != nil {
		t.Fatalf("Receive(%d) from %s: %v", max, q.Name(), err)
	}
	return ms
}

func receiveOne(t *testing.T, q queue.Queue, vis time.Duration) *queue.Message {
	t.Helper()
	ms := receive(t, q, 1, vis)
	if len(ms) != 1 {
		t.Fatalf("Receive(1) from %s returned %d messages, want 1", q.Name(), len(ms))
	}
	return ms[0]
}

func expectEmpty(t *testing.T, q queue.Queue) {
	t.Helper()
	if ms := receive(t, q, queue.MaxBatch, time.Minute); len(ms) != 0 {
		t.Fatalf("Receive from %s returned %d messages, want none (first id %s)", q.Name(), len(ms), ms[0].ID)
	}
}

func testRoundTrip(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	bodies := []struct {
		name string
		body []byte
	}{
		{"empty", []byte{}},
		{"text", []byte("hello, queue")},
		{"binary", []byte{0, 1, 2, 0xff, 0xfe, 0, '\n', 0x80}},
		{"64KiB", big},
	}
	for i, tc := range bodies {
		t.Run(tc.name, func(t *testing.T) {
			q := open(t, b, fmt.Sprintf("roundtrip%d", i))
			id := send(t, q, tc.body, queue.SendOptions{})
			m := receiveOne(t, q, time.Minute)
			if m.ID != id {
				t.Fatalf("received id %q, want %q", m.ID, id)
			}
			if !bytes.Equal(m.Body, tc.body) {
				t.Fatalf("body of %s: got %d bytes, want %d (equal content: false)", id, len(m.Body), len(tc.body))
			}
			if !holds(q, m) {
				t.Fatalf("Queue = %q, want %q", m.Queue, q.Name())
			}
			if m.DequeueCount != 1 {
				t.Fatalf("DequeueCount = %d, want 1", m.DequeueCount)
			}
			if m.LeaseToken == "" {
				t.Fatal("empty LeaseToken")
			}
			if m.InsertedAt.IsZero() {
				t.Fatalf("InsertedAt = %v, not set", m.InsertedAt)
			}
			if !m.VisibleAt.After(m.InsertedAt) {
				t.Fatalf("VisibleAt %v not after InsertedAt %v", m.VisibleAt, m.InsertedAt)
			}
			if err := q.Delete(context.Background(), m); err != nil {
				t.Fatalf("Delete %s: %v", id, err)
			}
			expectEmpty(t, q)
			if err := q.Delete(context.Background(), m); err == nil {
				t.Fatalf("second Delete of %s succeeded, want an error", id)
			}
		})
	}
}

func testReceiveCap(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q := open(t, b, "cap")
	for i := 0; i < queue.MaxBatch+8; i++ {
		send(t, q, []byte(fmt.Sprint(i)), queue.SendOptions{})
	}
	ms, err := q.Receive(context.Background(), 100, time.Minute)
	if err != nil {
		// Rejecting an out-of-range max is acceptable too; a silent over-delivery is not.
		ms = receive(t, q, queue.MaxBatch, time.Minute)
	}
	if len(ms) != queue.MaxBatch {
		t.Fatalf("Receive(100) returned %d messages, want %d", len(ms), queue.MaxBatch)
	}
	rest := receive(t, q, queue.MaxBatch, time.Minute)
	if len(rest) != 8 {
		t.Fatalf("second Receive returned %d messages, want 8", len(rest))
	}
	seen := map[string]bool{}
	for _, m := range append(ms, rest...) {
		if seen[m.Queue+"/"+m.ID] {
			t.Fatalf("message %s delivered twice while leased", m.ID)
		}
		seen[m.Queue+"/"+m.ID] = true
	}
}

func testEmptyReceive(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q := open(t, b, "empty")
	ms, err := q.Receive(context.Background(), queue.MaxBatch, time.Minute)
	if err != nil {
		t.Fatalf("Receive on empty queue: %v", err)
	}
	if len(ms) != 0 {
		t.Fatalf("Receive on empty queue returned %d messages", len(ms))
	}
}

func testRedelivery(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	q := open(t, b, "redeliver")
	id := send(t, q, []byte("x"), queue.SendOptions{})
	m1 := receiveOne(t, q, 30*time.Second)
	expectEmpty(t, q)
	advance(29 * time.Second)
	expectEmpty(t, q)
	advance(2 * time.Second)
	m2 := receiveOne(t, q, 30*time.Second)
	if m2.ID != id {
		t.Fatalf("redelivered id %q, want %q", m2.ID, id)
	}
	if m2.DequeueCount != m1.DequeueCount+1 {
		t.Fatalf("DequeueCount = %d after redelivery, want %d", m2.DequeueCount, m1.DequeueCount+1)
	}
	if m2.LeaseToken == m1.LeaseToken {
		t.Fatalf("lease token %q unchanged across receives", m2.LeaseToken)
	}
	if err := q.Delete(context.Background(), m2); err != nil {
		t.Fatalf("Delete with fresh token: %v", err)
	}
}

func testStaleToken(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "stale")
	send(t, q, []byte("x"), queue.SendOptions{})
	m1 := receiveOne(t, q, 10*time.Second)
	old := *m1
	advance(11 * time.Second)
	m2 := receiveOne(t, q, 10*time.Second)
	if err := q.Delete(ctx, &old); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("Delete with stale token: %v, want ErrLeaseLost", err)
	}
	stale := old
	if err := q.UpdateVisibility(ctx, &stale, 0); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("UpdateVisibility with stale token: %v, want ErrLeaseLost", err)
	}
	if bt, ok := queue.As[queue.Batcher](q); ok {
		errs := bt.DeleteBatch(ctx, []*queue.Message{&old})
		if len(errs) != 1 || !errors.Is(errs[0], queue.ErrLeaseLost) {
			t.Fatalf("DeleteBatch with stale token: %v, want [ErrLeaseLost]", errs)
		}
	}
	if err := q.Delete(ctx, m2); err != nil {
		t.Fatalf("Delete by current holder: %v", err)
	}
	// An expired lease that nobody took again is lost too: the message is visible.
	send(t, q, []byte("y"), queue.SendOptions{})
	m3 := receiveOne(t, q, 10*time.Second)
	advance(11 * time.Second)
	if err := q.Delete(ctx, m3); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("Delete after lease expiry: %v, want ErrLeaseLost", err)
	}
}

func testStaleAfterUpdate(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "staleupd")
	send(t, q, []byte("x"), queue.SendOptions{})
	m := receiveOne(t, q, time.Minute)
	old := *m
	if err := q.UpdateVisibility(ctx, m, time.Minute); err != nil {
		t.Fatalf("UpdateVisibility (renew): %v", err)
	}
	if m.LeaseToken == old.LeaseToken {
		t.Fatal("UpdateVisibility did not change the lease token")
	}
	if err := q.Delete(ctx, &old); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("Delete with pre-renewal token: %v, want ErrLeaseLost", err)
	}
	if err := q.Delete(ctx, m); err != nil {
		t.Fatalf("Delete with renewed token: %v", err)
	}
}

func testReleaseToHead(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "release")
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, send(t, q, []byte{byte(i)}, queue.SendOptions{}))
	}
	first := receiveOne(t, q, time.Minute)
	if first.ID != ids[0] {
		t.Fatalf("first receive got %s, want the oldest %s", first.ID, ids[0])
	}
	if err := q.UpdateVisibility(ctx, first, 0); err != nil {
		t.Fatalf("UpdateVisibility(0): %v", err)
	}
	again := receiveOne(t, q, time.Minute)
	if again.ID != ids[0] {
		t.Fatalf("after release got %s, want the released %s back at the head", again.ID, ids[0])
	}
	if again.DequeueCount != 2 {
		t.Fatalf("DequeueCount = %d after release and receive, want 2", again.DequeueCount)
	}
	rest := receiveUpTo(t, q, 4, time.Minute)
	if len(rest) != 4 {
		t.Fatalf("got %d remaining messages, want 4", len(rest))
	}
	for i, m := range rest {
		if m.ID != ids[i+1] {
			t.Fatalf("remaining[%d] = %s, want %s (FIFO)", i, m.ID, ids[i+1])
		}
	}
}

// receiveUpTo receives until it holds n messages, in the order received, or 10 s of
// receives brought no more: Receive returns up to max, and a backend may hand out what it
// has at the moment (JetStream's pull returns with the deliveries that arrived in time).
func receiveUpTo(t *testing.T, q queue.Queue, n int, vis time.Duration) []*queue.Message {
	t.Helper()
	var got []*queue.Message
	for deadline := time.Now().Add(10 * time.Second); len(got) < n && time.Now().Before(deadline); {
		ms := receive(t, q, n-len(got), vis)
		if len(ms) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		got = append(got, ms...)
	}
	return got
}

func testUpdateVisibilityDelay(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "updvis")
	id := send(t, q, []byte("x"), queue.SendOptions{})
	m := receiveOne(t, q, time.Second)
	if err := q.UpdateVisibility(ctx, m, time.Minute); err != nil {
		t.Fatalf("UpdateVisibility(1m): %v", err)
	}
	advance(30 * time.Second)
	expectEmpty(t, q)
	// The renewed lease is still valid past the original visibility timeout.
	if err := q.UpdateVisibility(ctx, m, time.Minute); err != nil {
		t.Fatalf("second renewal: %v", err)
	}
	advance(61 * time.Second)
	m2 := receiveOne(t, q, time.Minute)
	if m2.ID != id || m2.DequeueCount != 2 {
		t.Fatalf("got %s (count %d), want %s (count 2)", m2.ID, m2.DequeueCount, id)
	}
}

func testDelayedSend(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	q := open(t, b, "delayed")
	id := send(t, q, []byte("later"), queue.SendOptions{Delay: time.Minute})
	now := send(t, q, []byte("now"), queue.SendOptions{})
	m := receiveOne(t, q, time.Hour)
	if m.ID != now {
		t.Fatalf("got %s, want the undelayed %s", m.ID, now)
	}
	expectEmpty(t, q)
	if d, err := q.Depth(context.Background()); err != nil || d != 2 {
		t.Fatalf("Depth = %d, %v; want 2 (delayed messages count)", d, err)
	}
	advance(61 * time.Second)
	m = receiveOne(t, q, time.Hour)
	if m.ID != id || string(m.Body) != "later" || m.DequeueCount != 1 {
		t.Fatalf("got %s %q count %d, want %s \"later\" count 1", m.ID, m.Body, m.DequeueCount, id)
	}
}

func testAttributes(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q := open(t, b, "attrs")
	attrs := map[string]string{
		queue.AttrReason:     "handler failed: \"boom\"\n",
		queue.AttrOriginalID: "abc-123",
		"unicode":            "héllo ✓",
	}
	send(t, q, []byte("a"), queue.SendOptions{Attributes: attrs})
	send(t, q, []byte("b"), queue.SendOptions{})
	ms := receive(t, q, 2, time.Minute)
	if len(ms) != 2 {
		t.Fatalf("got %d messages, want 2", len(ms))
	}
	got := ms[0].Attributes
	if len(got) != len(attrs) {
		t.Fatalf("attributes = %v, want %v", got, attrs)
	}
	for k, v := range attrs {
		if got[k] != v {
			t.Fatalf("attribute %q = %q, want %q", k, got[k], v)
		}
	}
	if len(ms[1].Attributes) != 0 {
		t.Fatalf("message sent without attributes has %v", ms[1].Attributes)
	}
}

func testDepth(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "depth")
	depth := func() int64 {
		t.Helper()
		d, err := q.Depth(ctx)
		if err != nil {
			t.Fatalf("Depth: %v", err)
		}
		return d
	}
	if d := depth(); d != 0 {
		t.Fatalf("Depth of new queue = %d", d)
	}
	for i := 0; i < 10; i++ {
		send(t, q, []byte("x"), queue.SendOptions{})
	}
	if d := depth(); d != 10 {
		t.Fatalf("Depth = %d after 10 sends, want 10", d)
	}
	ms := receive(t, q, 4, time.Minute)
	if d := depth(); d != 10 {
		t.Fatalf("Depth = %d with 4 leased, want 10 (leased count)", d)
	}
	for _, m := range ms {
		if err := q.Delete(ctx, m); err != nil {
			t.Fatalf("Delete %s: %v", m.ID, err)
		}
	}
	if d := depth(); d != 6 {
		t.Fatalf("Depth = %d after 4 deletes, want 6", d)
	}
}

func testIndependentQueues(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	names := []string{"alpha", "beta", "alpha" + queue.PoisonSuffix}
	qs := map[string]queue.Queue{}
	for i, n := range names {
		qs[n] = open(t, b, n)
		for j := 0; j <= i; j++ {
			send(t, qs[n], []byte(n), queue.SendOptions{})
		}
	}
	for i, n := range names {
		ms := receive(t, qs[n], queue.MaxBatch, time.Minute)
		if len(ms) != i+1 {
			t.Fatalf("queue %s returned %d messages, want %d", n, len(ms), i+1)
		}
		for _, m := range ms {
			if string(m.Body) != n || !holds(qs[n], m) {
				t.Fatalf("queue %s returned a message of %q (body %q)", n, m.Queue, m.Body)
			}
		}
	}
	// Reopening a queue reaches the same messages.
	again := open(t, b, "beta")
	if d, err := again.Depth(ctx); err != nil || d != 2 {
		t.Fatalf("reopened beta Depth = %d, %v; want 2", d, err)
	}
}

func testConcurrentReceivers(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "concurrent")
	const n = 400
	for i := 0; i < n; i++ {
		send(t, q, []byte(fmt.Sprint(i)), queue.SendOptions{})
	}
	var mu sync.Mutex
	seen := make(map[string]int, n)
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ms, err := q.Receive(ctx, 7, time.Hour)
				if err != nil {
					errc <- err
					return
				}
				if len(ms) == 0 {
					return
				}
				mu.Lock()
				for _, m := range ms {
					seen[m.Queue+"/"+m.ID]++ // a wrapper's shards may reuse ids
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("concurrent Receive: %v", err)
	}
	if len(seen) != n {
		t.Fatalf("receivers saw %d distinct messages, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("message %s received %d times while leased", id, c)
		}
	}
}

func testBatcher(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "batcher")
	bt, _ := queue.As[queue.Batcher](q)
	for i := 0; i < 3; i++ {
		send(t, q, []byte{byte(i)}, queue.SendOptions{})
	}
	ms := receive(t, q, 3, time.Minute)
	if len(ms) != 3 {
		t.Fatalf("got %d messages, want 3", len(ms))
	}
	stale := *ms[1]
	if err := q.UpdateVisibility(ctx, ms[1], time.Minute); err != nil {
		t.Fatalf("UpdateVisibility: %v", err)
	}
	errs := bt.DeleteBatch(ctx, []*queue.Message{ms[0], &stale, ms[2]})
	if len(errs) != 3 {
		t.Fatalf("DeleteBatch returned %d errors for 3 messages", len(errs))
	}
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("DeleteBatch errors %v, want success for the live leases", errs)
	}
	if !errors.Is(errs[1], queue.ErrLeaseLost) {
		t.Fatalf("DeleteBatch error for the stale token = %v, want ErrLeaseLost", errs[1])
	}
	if d, err := q.Depth(ctx); err != nil || d != 1 {
		t.Fatalf("Depth = %d, %v; want 1", d, err)
	}
	if errs := bt.DeleteBatch(ctx, nil); len(errs) != 0 {
		t.Fatalf("DeleteBatch(nil) = %v", errs)
	}
}

func testWaiter(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	ctx := context.Background()
	q := open(t, b, "waiter")
	w, _ := queue.As[queue.Waiter](q)
	done := make(chan error, 1)
	go func() { done <- w.Wait(ctx, time.Minute) }()
	// The waiter may or may not be parked yet; either way the send must release it.
	time.Sleep(20 * time.Millisecond)
	send(t, q, []byte("wake"), queue.SendOptions{})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Send did not wake a waiter")
	}
	// A visible message makes Wait return at once, well before this deadline.
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	defer tcancel()
	if err := w.Wait(tctx, 0); err != nil {
		t.Fatalf("Wait with a visible message: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	receive(t, q, 1, time.Hour)
	if err := w.Wait(cctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context and nothing visible = %v, want context.Canceled", err)
	}
}
