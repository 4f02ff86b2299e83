package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// TestBodySizeBounds: the store refuses a body above MaxBodyBytes on every way in (Send,
// SendBatch, MoveTo) with ErrTooLarge; a receive with a body limit leases a larger message
// without loading its body (Oversize gives its size), and MoveTo moves such a message with
// the body it has in the store, whole.
func TestBodySizeBounds(t *testing.T) {
	ctx := context.Background()
	b := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{MaxBodyBytes: 1000})
	q, err := b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := b.Queue(ctx, "jobs-poison")
	if err != nil {
		t.Fatal(err)
	}
	over := bytes.Repeat([]byte{'o'}, 1001)
	if _, err := q.Send(ctx, over, queue.SendOptions{}); !errors.Is(err, local.ErrTooLarge) {
		t.Errorf("Send of 1001 bytes into a 1000-byte store: %v, want ErrTooLarge", err)
	}
	if _, err := q.SendBatch(ctx, [][]byte{[]byte("ok"), over}, queue.SendOptions{}); !errors.Is(err, local.ErrTooLarge) {
		t.Errorf("SendBatch with a 1001-byte body: %v, want ErrTooLarge", err)
	}
	if d, _ := q.Depth(ctx); d != 0 {
		t.Fatalf("depth %d after refused sends, want 0 (nothing half-sent)", d)
	}
	big := bytes.Repeat([]byte{'b'}, 1000)
	for _, body := range [][]byte{[]byte("small"), big, {}} {
		if _, err := q.Send(ctx, body, queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := q.ReceiveLimited(ctx, 10, time.Minute, 100)
	if err != nil || len(ms) != 3 {
		t.Fatalf("ReceiveLimited: %d messages, %v", len(ms), err)
	}
	if string(ms[0].Body) != "small" || ms[0].Oversize != 0 {
		t.Errorf("small message: body %q oversize %d", ms[0].Body, ms[0].Oversize)
	}
	if ms[1].Body != nil || ms[1].Oversize != 1000 {
		t.Errorf("1000-byte message over a 100-byte limit: body of %d bytes loaded, oversize %d; want nil and 1000", len(ms[1].Body), ms[1].Oversize)
	}
	if ms[2].Body == nil || len(ms[2].Body) != 0 || ms[2].Oversize != 0 {
		t.Errorf("empty message: body %v oversize %d; want an empty body", ms[2].Body, ms[2].Oversize)
	}
	if err := q.MoveTo(ctx, ms[0], dead, over, queue.SendOptions{}); !errors.Is(err, local.ErrTooLarge) {
		t.Errorf("MoveTo with a 1001-byte body: %v, want ErrTooLarge", err)
	}
	attrs := map[string]string{queue.AttrReason: "too big"}
	if err := q.MoveTo(ctx, ms[1], dead, nil, queue.SendOptions{Attributes: attrs}); err != nil {
		t.Fatalf("MoveTo of an unloaded message: %v", err)
	}
	got, err := dead.Receive(ctx, 10, time.Minute)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Body, big) || got[0].Attributes[queue.AttrReason] != "too big" {
		t.Fatalf("dead letter of the unloaded message: %d messages %v; want its whole stored body and reason", len(got), err)
	}
	// A lost lease moves nothing.
	if err := q.UpdateVisibility(ctx, ms[2], 0); err != nil {
		t.Fatal(err)
	}
	stale := *ms[2]
	stale.Oversize, stale.Body = 5, nil
	if err := q.MoveTo(ctx, &stale, dead, nil, queue.SendOptions{}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("MoveTo of an unloaded message whose lease is gone: %v, want ErrLeaseLost", err)
	}
	if d, _ := dead.Depth(ctx); d != 1 {
		t.Errorf("dead-letter depth %d after a refused move, want 1", d)
	}
}

// TestListPagesWithCursor: List reads without leasing, leaves bodies above its limit unread,
// and the cursor it returns continues the listing where it stopped, each message once, also
// when messages arrive meanwhile.
func TestListPagesWithCursor(t *testing.T) {
	ctx := context.Background()
	b := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{})
	q, err := b.Queue(ctx, "dead")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		body := []byte(fmt.Sprint(i))
		if i == 3 {
			body = bytes.Repeat([]byte{'x'}, 5000)
		}
		if _, err := q.Send(ctx, body, queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	after, pages := "", 0
	for {
		next, err := q.List(ctx, after, 3, 4096, func(m *queue.Message) error {
			seen[m.ID]++
			if m.ID == "4" && (m.Body != nil || m.Oversize != 5000) {
				t.Errorf("message 4: body of %d bytes loaded, oversize %d; want unread, 5000", len(m.Body), m.Oversize)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if pages == 1 {
			if _, err := q.Send(ctx, []byte("late"), queue.SendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if next == "" {
			break
		}
		after = next
		if pages > 10 {
			t.Fatal("the cursor does not advance")
		}
	}
	if len(seen) != 8 || pages != 3 {
		t.Errorf("listed %d messages in %d pages (%v), want 8 in 3", len(seen), pages, seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("message %s listed %d times", id, n)
		}
	}
	if ms, err := q.Receive(ctx, 32, time.Minute); err != nil || len(ms) != 8 {
		t.Errorf("after listing, %d messages receivable (%v), want all 8: List must not lease", len(ms), err)
	}
	if _, err := q.List(ctx, "garbage", 3, 0, func(*queue.Message) error { return nil }); err == nil {
		t.Error("List accepted a cursor it never gave")
	}
}

// TestOrderedMovesUnreadBody: in ordered mode a body above the store's limit (left by an
// older store) is received unread, refused without a binding limit of its own, and the
// ordered queue moves it to the dead-letter queue in one transaction, whole (without MoveTo
// it could only be sent empty, so it stayed).
func TestOrderedMovesUnreadBody(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	old := openStore(t, path, local.Options{})
	oq, err := old.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{'b'}, 200)
	if _, err := oq.Send(ctx, big, queue.SendOptions{Attributes: map[string]string{queue.AttrOrderKey: "1"}}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	b := openStore(t, path, local.Options{MaxBodyBytes: 100})
	q, err := b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := b.Queue(ctx, "jobs-poison")
	if err != nil {
		t.Fatal(err)
	}
	// No binding limit: the store's own left the body unread, and that alone refuses it.
	var handled atomic.Int32
	l, err := listener.New(listener.Config{
		Queue: q, Ordered: true, DeadLetter: dead,
		Handler: listener.HandlerFunc(func(context.Context, *queue.Message) error {
			handled.Add(1)
			return nil
		}),
		Backoff: builtin.NewBackoff(builtin.BackoffOptions{}), Scaler: builtin.NewTarget(0),
		Poison:  builtin.NewPoison(builtin.PoisonOptions{}),
		MinIdle: 10 * time.Millisecond, MaxIdle: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	wait := l.Start(lctx)
	deadline := time.Now().Add(30 * time.Second)
	for l.State().Poisoned != 1 {
		if time.Now().After(deadline) {
			cancel()
			_ = wait()
			t.Fatalf("after 30s: %+v; want the unread message dead-lettered", l.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if handled.Load() != 0 {
		t.Error("the handler was given a message whose body was left unread")
	}
	got, err := dead.Peek(ctx, 0)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Body, big) {
		t.Fatalf("dead letter: %d messages, %v; want the whole 200-byte body", len(got), err)
	}
	if r := got[0].Attributes[queue.AttrReason]; r != "message body of 200 bytes exceeds the backend's body limit" {
		t.Errorf("dead letter reason %q", r)
	}
}
