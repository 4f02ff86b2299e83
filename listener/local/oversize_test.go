package local_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/listener/sharded"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// loadSpy records the largest body a receive of the queue below loaded into memory.
type loadSpy struct {
	queue.Decorator
	largest *atomic.Int64
}

func (s loadSpy) note(ms []*queue.Message, err error) ([]*queue.Message, error) {
	for _, m := range ms {
		for n := int64(len(m.Body)); n > s.largest.Load(); {
			if s.largest.CompareAndSwap(s.largest.Load(), n) {
				break
			}
		}
	}
	return ms, err
}

func (s loadSpy) Receive(ctx context.Context, max int, vis time.Duration) ([]*queue.Message, error) {
	return s.note(s.Queue.Receive(ctx, max, vis))
}

func (s loadSpy) ReceiveLimited(ctx context.Context, max int, vis time.Duration, maxBody int64) ([]*queue.Message, error) {
	return s.note(s.Decorator.ReceiveLimited(ctx, max, vis, maxBody))
}

func (s loadSpy) ReceiveOrdered(ctx context.Context, max int, vis time.Duration, maxBody int64) ([]*queue.Message, time.Time, error) {
	ms, held, err := s.Decorator.ReceiveOrdered(ctx, max, vis, maxBody)
	ms, err = s.note(ms, err)
	return ms, held, err
}

// TestOversizeNeverLoaded: a binding whose queue is sharded over the local store, or ordered
// on it, dead-letters bodies above MaxMessageBytes without loading them (the store leaves
// them on disk: receives load nothing above the limit, and the process allocates far less than
// one such body), whole and with the reason; the small messages are handled.
func TestOversizeNeverLoaded(t *testing.T) {
	const (
		limit = 1 << 10
		big   = 4 << 20
		n     = 6
	)
	for _, mode := range []string{"sharded", "ordered"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			b := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{})
			var largest atomic.Int64
			spy := func(name string) queue.Queue {
				q, err := b.Open(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				return loadSpy{queue.Decorator{Queue: q}, &largest}
			}
			var in queue.Queue
			var err error
			switch mode {
			case "sharded":
				in, err = sharded.New("jobs", []queue.Queue{spy("jobs-0"), spy("jobs-1")}, sharded.Options{})
			case "ordered":
				in = spy("jobs")
			}
			if err != nil {
				t.Fatal(err)
			}
			dead, err := b.Open(ctx, "jobs-poison")
			if err != nil {
				t.Fatal(err)
			}
			body := bytes.Repeat([]byte{'x'}, big)
			for i := range n {
				attrs := map[string]string{queue.AttrOrderKey: "1"}
				if _, err := in.Send(ctx, body, queue.SendOptions{Attributes: attrs}); err != nil {
					t.Fatal(err)
				}
				if _, err := in.Send(ctx, fmt.Appendf(nil, "small %d", i), queue.SendOptions{Attributes: attrs}); err != nil {
					t.Fatal(err)
				}
			}
			body = nil
			var handledBig atomic.Bool
			l, err := listener.New(listener.Config{
				Queue: in, Ordered: mode == "ordered", DeadLetter: dead, MaxMessageBytes: limit, MaxWorkers: 2,
				Handler: listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
					if len(m.Body) > limit {
						handledBig.Store(true)
					}
					return nil
				}),
				Backoff: builtin.NewBackoff(builtin.BackoffOptions{}),
				Scaler:  builtin.NewTarget(0),
				Poison:  builtin.NewPoison(builtin.PoisonOptions{}),
				MinIdle: 10 * time.Millisecond, MaxIdle: 10 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			lctx, cancel := context.WithCancel(ctx)
			wait := l.Start(lctx)
			deadline := time.Now().Add(time.Minute)
			for s := l.State(); s.Processed != n || s.Poisoned != n; s = l.State() {
				if time.Now().After(deadline) {
					cancel()
					_ = wait()
					t.Fatalf("after a minute: processed %d, poisoned %d; want %d each", s.Processed, s.Poisoned, n)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			if err := wait(); err != nil {
				t.Fatal(err)
			}
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if got := largest.Load(); got > limit {
				t.Errorf("a receive loaded a body of %d bytes, above the %d-byte limit", got, limit)
			}
			if handledBig.Load() {
				t.Error("the handler was given an oversize body")
			}
			// Loading the bodies would allocate n × 4 MiB; one alone is more than this bound.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > big {
				t.Errorf("the listener allocated %d bytes while dead-lettering %d bodies of %d: they were loaded", alloc, n, big)
			}
			dls, err := dead.(*local.Queue).Peek(ctx, 0)
			if err != nil || len(dls) != n {
				t.Fatalf("%d dead letters, %v; want %d", len(dls), err, n)
			}
			for _, d := range dls {
				if len(d.Body) != big || !strings.Contains(d.Attributes[queue.AttrReason], "exceeds max_message_bytes") {
					t.Fatalf("dead letter of %d bytes with reason %q", len(d.Body), d.Attributes[queue.AttrReason])
				}
			}
		})
	}
}
