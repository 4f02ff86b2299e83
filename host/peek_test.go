package host

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestPeekDoesNotConsume: Peek shows every message in receive order, leased and delayed ones
// with their VisibleAt, honours max, and changes nothing a receiver sees.
func TestPeekDoesNotConsume(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) queue.Backend
	}{
		{"memory", func(t *testing.T) queue.Backend { return memory.New(memory.Options{}) }},
		{"local", func(t *testing.T) queue.Backend {
			b, err := local.Open(ctx, filepath.Join(t.TempDir(), "q.db"), local.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.open(t)
			t.Cleanup(func() { b.Close() })
			q, err := b.Open(ctx, "jobs")
			if err != nil {
				t.Fatal(err)
			}
			for _, body := range []string{"a", "b", "c"} {
				if _, err := q.Send(ctx, []byte(body), queue.SendOptions{Attributes: map[string]string{"k": body}}); err != nil {
					t.Fatal(err)
				}
			}
			leased, err := q.Receive(ctx, 1, time.Hour)
			if err != nil || len(leased) != 1 || string(leased[0].Body) != "a" {
				t.Fatalf("receive: %v %v", leased, err)
			}
			p, ok := q.(Peeker)
			if !ok {
				t.Fatalf("%T does not implement Peeker", q)
			}
			for range 2 { // peeking twice shows the same: nothing consumed
				ms, err := p.Peek(ctx, 0)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, m := range ms {
					got = append(got, string(m.Body)+"/"+m.Attributes["k"])
				}
				// Receive order: visible ones first, the leased "a" (visible in an hour) last.
				if want := []string{"b/b", "c/c", "a/a"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
					t.Fatalf("peek shows %v, want %v", got, want)
				}
				if ms[2].DequeueCount != 1 || ms[0].DequeueCount != 0 || !ms[2].VisibleAt.After(time.Now().Add(30*time.Minute)) {
					t.Fatalf("leased message: dequeue count %d visible at %v; unleased dequeue count %d", ms[2].DequeueCount, ms[2].VisibleAt, ms[0].DequeueCount)
				}
			}
			if ms, err := p.Peek(ctx, 1); err != nil || len(ms) != 1 || string(ms[0].Body) != "b" {
				t.Fatalf("peek max 1: %v %v, want b", ms, err)
			}
			rest, err := q.Receive(ctx, 32, time.Minute)
			if err != nil || len(rest) != 2 || rest[0].DequeueCount != 1 {
				t.Fatalf("receive after peek: %d messages (err %v), want the 2 unleased ones, first receive", len(rest), err)
			}
		})
	}
}
