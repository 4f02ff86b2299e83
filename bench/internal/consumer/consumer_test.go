package consumer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestEachConsumerDrainsOnce checks the three consumers do the same job: every message
// handled (at least once), the queue left empty, rejected messages not redelivered.
func TestEachConsumerDrainsOnce(t *testing.T) {
	for _, k := range Kinds {
		t.Run(string(k), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			b := memory.New(memory.Options{})
			q, _ := b.Open(ctx, "work")
			dl, _ := b.Open(ctx, "work-poison")
			const n = 200
			for i := range n {
				if _, err := q.Send(ctx, fmt.Appendf(nil, "m%d", i), queue.SendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			seen := map[string]int{}
			done := make(chan struct{})
			h := listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
				mu.Lock()
				defer mu.Unlock()
				seen[string(m.Body)]++
				if len(seen) == n && seen[string(m.Body)] == 1 {
					close(done)
				}
				if string(m.Body) == "m7" {
					return outcome.Reject(fmt.Errorf("bad"))
				}
				return nil
			})
			rctx, stop := context.WithCancel(ctx)
			errc := make(chan error, 1)
			go func() {
				errc <- Run(rctx, k, Options{Queue: q, DeadLetter: dl, Handler: h, Workers: 4, PollInterval: 10 * time.Millisecond, NaiveIdle: time.Millisecond})
			}()
			select {
			case <-done:
			case <-ctx.Done():
				t.Fatalf("handled %d of %d before the deadline", len(seen), n)
			}
			// Give the last deletes a moment, then stop.
			deadline := time.Now().Add(5 * time.Second)
			for {
				d, _ := q.Depth(ctx)
				if d == 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			stop()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if d, _ := q.Depth(ctx); d != 0 {
				t.Errorf("depth %d after draining, want 0", d)
			}
			mu.Lock()
			defer mu.Unlock()
			for body, c := range seen {
				if c != 1 {
					t.Errorf("%s handled %d times", body, c)
				}
			}
		})
	}
}

func TestUnknownKind(t *testing.T) {
	if err := Run(context.Background(), "spin", Options{}); err == nil {
		t.Fatal("unknown consumer accepted")
	}
}
