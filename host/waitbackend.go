package host

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// A host started beside a backend that cannot serve yet (a JetStream cluster without its
// meta leader, Azure storage unreachable) does not exit: exit 2 means a bad config, and a
// crash loop until the backend is back only hides where the problem is. While New builds the
// bindings, opening a binding's queues is retried as long as it fails with an error that
// waiting may fix (queue.ErrUnavailable: each backend classifies its own errors); /readyz
// answers 503 naming the binding and the reason meanwhile. Any other error (credentials,
// a missing stream, a bad path) fails the start as before. A reload does not wait: it
// reports the error and keeps the running config.

// Retries of a backend open at start: from openRetryMin, doubling to openRetryMax.
const (
	openRetryMin = 500 * time.Millisecond
	openRetryMax = time.Second
)

// untilServed runs open until it succeeds or fails with an error waiting cannot fix; during
// New, an error matching queue.ErrUnavailable lists key as waiting (with the error) and open
// is tried again after a back-off, until ctx ends.
func (h *Host) untilServed(ctx context.Context, key string, open func(context.Context) error) error {
	defer h.waiting.Delete(key)
	delay := openRetryMin
	for {
		err := h.openNoting(ctx, key, open)
		if err == nil || !errors.Is(err, queue.ErrUnavailable) || !h.starting.Load() {
			return err
		}
		// /readyz answers without a token: a URL's user and password stay out of it.
		if _, was := h.waiting.Swap(key, urlUser.ReplaceAllString(err.Error(), "${1}REDACTED@")); !was {
			h.log.Warn("backend not ready; waiting for it before the binding starts", "binding", key, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w while waiting for the backend: %w", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, openRetryMax)
	}
}

// openNoting runs open; during New, one that has not returned after slowOpen lists key as
// waiting ("no answer yet") unless a reason is listed already: an open can itself wait for
// an answer for a while (the nats backend retries unanswered JetStream requests for 30 s).
func (h *Host) openNoting(ctx context.Context, key string, open func(context.Context) error) error {
	if !h.starting.Load() {
		return open(ctx)
	}
	var mu sync.Mutex
	done := false
	slow := time.AfterFunc(slowOpen, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			h.waiting.LoadOrStore(key, fmt.Sprintf("opening its queues: no answer after %s", slowOpen))
		}
	})
	err := open(ctx)
	mu.Lock()
	done = true
	mu.Unlock()
	slow.Stop()
	return err
}

// slowOpen is how long an open runs before /readyz names its binding as waiting.
const slowOpen = 2 * time.Second

// urlUser matches the user info of a URL in an error's text (nats://user:pass@host).
var urlUser = regexp.MustCompile(`([a-z]+://)[^/@\s]+@`)

// waitingFor lists the bindings waiting for their backend, "<key>: <reason>", sorted.
func (h *Host) waitingFor() []string {
	var out []string
	h.waiting.Range(func(k, v any) bool {
		out = append(out, k.(string)+": "+v.(string))
		return true
	})
	slices.Sort(out)
	return out
}
