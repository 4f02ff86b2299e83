package queuetest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/clock/clocktest"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/listener/queuetest"
)

// countingBackend is a custom backend: every queue it opens is the inner backend's, wrapped
// to count the messages sent. Embedding queue.Decorator forwards every optional capability
// of the inner queue, so the wrapper loses none of them; it overrides only Send.
type countingBackend struct {
	queue.Backend
	sent atomic.Int64
}

func (b *countingBackend) Open(ctx context.Context, name string) (queue.Queue, error) {
	q, err := b.Backend.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return &countingQueue{Decorator: queue.Decorator{Queue: q}, sent: &b.sent}, nil
}

type countingQueue struct {
	queue.Decorator
	sent *atomic.Int64
}

func (q *countingQueue) Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error) {
	id, err := q.Decorator.Send(ctx, body, opts)
	if err == nil {
		q.sent.Add(1)
	}
	return id, err
}

// countingSuite is the conformance suite's view of countingBackend: a fresh backend per case,
// on a fake clock whose Advance the suite calls instead of sleeping.
func countingSuite() queuetest.Suite {
	return queuetest.Suite{Name: "counting", New: func(t *testing.T) (queue.Backend, func(time.Duration)) {
		clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		inner := memory.New(memory.Options{Clock: clk})
		t.Cleanup(func() { inner.Close() })
		return &countingBackend{Backend: inner}, clk.Advance
	}}
}

// A custom backend is done when it passes the conformance suite: a test of its package
// calls queuetest.Run(t, countingSuite()), as TestCountingBackend does. Used through the
// contract, the wrapper counts and keeps every capability of the queue it wraps.
func ExampleRun() {
	ctx := context.Background()
	inner := memory.New(memory.Options{})
	b := &countingBackend{Backend: inner}
	defer b.Close()
	q, _ := b.Open(ctx, "orders")
	for range 3 {
		if _, err := q.Send(ctx, []byte("x"), queue.SendOptions{}); err != nil {
			fmt.Println(err)
			return
		}
	}
	plain, _ := inner.Open(ctx, "other")
	fmt.Println("sent:", b.sent.Load())
	fmt.Println("same capabilities as the inner queue:", queue.Of(q) == queue.Of(plain))
	// Output:
	// sent: 3
	// same capabilities as the inner queue: true
}

// The custom backend of ExampleRun passes the whole contract.
func TestCountingBackend(t *testing.T) { queuetest.Run(t, countingSuite()) }
