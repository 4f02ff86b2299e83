package queuetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// batchRecorder is a listener.BatchHandler that gives each message the verdict its body
// names on first delivery (ok, retry, reject, none: no verdict) and ok afterwards.
type batchRecorder struct {
	mu     sync.Mutex
	called bool
	first  []string       // bodies of the first call
	seen   map[string]int // deliveries by body
}

func (h *batchRecorder) Handle(context.Context, *queue.Message) outcome.Outcome {
	return outcome.Failed(errors.New("a batching listener called Handle"))
}

func (h *batchRecorder) HandleBatch(_ context.Context, ms []*queue.Message, vs []outcome.Outcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, m := range ms {
		body := string(m.Body)
		if !h.called {
			h.first = append(h.first, body)
		}
		h.seen[body]++
		if h.seen[body] > 1 {
			vs[i] = outcome.Outcome{}
			continue
		}
		switch kind, _, _ := strings.Cut(body, "-"); kind {
		case "ok":
			vs[i] = outcome.Outcome{}
		case "retry":
			vs[i] = outcome.RetryAfter(time.Second, errors.New("later"))
		case "reject":
			vs[i] = outcome.Rejected(errors.New("bad record " + body))
		}
	}
	h.called = true
}

// testBatchListener runs a batching listener on the backend: every message of a batch is
// settled by its own verdict (ok deleted, retry redelivered after its delay, reject
// dead-lettered with its reason, no verdict retried by the poison policy).
func testBatchListener(t *testing.T, b queue.Backend, advance func(time.Duration)) {
	q := open(t, b, "batchwork")
	dl := open(t, b, "batchwork"+queue.PoisonSuffix)
	var bodies []string
	for i, kind := range []string{"ok", "retry", "reject", "none", "ok", "ok", "retry", "reject"} {
		bodies = append(bodies, fmt.Sprintf("%s-%d", kind, i))
	}
	for _, body := range bodies {
		send(t, q, []byte(body), queue.SendOptions{})
	}
	h := &batchRecorder{seen: map[string]int{}}
	l, err := listener.New(listener.Config{
		Queue: q, DeadLetter: dl, Handler: h,
		Batch:   listener.BatchConfig{MaxMessages: 100, MaxWait: time.Second},
		Backoff: idleBackoff{}, Scaler: depthScaler{}, Poison: retryPoison{delay: time.Second},
		// A backend on a fake clock does not wake the listener when a delay ends: poll.
		MinIdle: 50 * time.Millisecond, MaxIdle: 50 * time.Millisecond,
		MaxWorkers: 1,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for s := l.State(); s.Processed != 6 || s.Poisoned != 2; s = l.State() {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: processed %d, poisoned %d; want 6 and 2", s.Processed, s.Poisoned)
		}
		if advance != nil {
			advance(200 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.first) != len(bodies) {
		t.Errorf("the first call held %d messages (%v), want all %d", len(h.first), h.first, len(bodies))
	}
	for _, body := range bodies {
		want := 1
		if k, _, _ := strings.Cut(body, "-"); k == "retry" || k == "none" {
			want = 2
		}
		if h.seen[body] != want {
			t.Errorf("%s handled %d times, want %d", body, h.seen[body], want)
		}
	}
	dead := receive(t, dl, queue.MaxBatch, time.Minute)
	if len(dead) != 2 {
		t.Fatalf("%d dead letters, want the 2 rejects", len(dead))
	}
	for _, d := range dead {
		if r := d.Attributes[queue.AttrReason]; !strings.HasPrefix(string(d.Body), "reject") || !strings.Contains(r, "bad record "+string(d.Body)) {
			t.Errorf("dead letter %q has reason %q, want a reject with its own reason", d.Body, r)
		}
	}
	expectEmpty(t, q)
}
