// Package countq wraps a listener.Queue to count every call made to it: the cost model of a
// hosted queue (Azure bills each request as one storage transaction, empty receives
// included), applied to every backend so the consumers can be compared on equal terms.
package countq

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/listener"
)

// Counts are the calls made through a wrapped queue.
type Counts struct {
	Receive, EmptyReceive, Delete, DeleteBatch, Update, Send, Depth, Wait atomic.Int64
	// Received counts messages returned by Receive.
	Received atomic.Int64
}

// Transactions is the number of requests a hosted queue would bill: every call except
// Wait, which is a local wake-up and reaches no store.
func (c *Counts) Transactions() int64 {
	return c.Receive.Load() + c.Delete.Load() + c.DeleteBatch.Load() + c.Update.Load() +
		c.Send.Load() + c.Depth.Load()
}

// Snapshot is a copy of Counts at one moment.
type Snapshot struct {
	Receive, EmptyReceive, Delete, DeleteBatch, Update, Send, Depth, Wait, Received int64
	Transactions                                                                    int64
}

// Snapshot copies the counters.
func (c *Counts) Snapshot() Snapshot {
	return Snapshot{
		Receive: c.Receive.Load(), EmptyReceive: c.EmptyReceive.Load(), Delete: c.Delete.Load(),
		DeleteBatch: c.DeleteBatch.Load(), Update: c.Update.Load(), Send: c.Send.Load(),
		Depth: c.Depth.Load(), Wait: c.Wait.Load(), Received: c.Received.Load(),
		Transactions: c.Transactions(),
	}
}

// Sub returns s minus o, counter by counter.
func (s Snapshot) Sub(o Snapshot) Snapshot {
	return Snapshot{
		Receive: s.Receive - o.Receive, EmptyReceive: s.EmptyReceive - o.EmptyReceive,
		Delete: s.Delete - o.Delete, DeleteBatch: s.DeleteBatch - o.DeleteBatch,
		Update: s.Update - o.Update, Send: s.Send - o.Send, Depth: s.Depth - o.Depth,
		Wait: s.Wait - o.Wait, Received: s.Received - o.Received,
		Transactions: s.Transactions - o.Transactions,
	}
}

// Wrap returns q counting into c. The result implements listener.Batcher and
// listener.Waiter exactly when q does, so the listener takes the same code paths as with q.
func Wrap(q listener.Queue, c *Counts) listener.Queue {
	base := &queue{q: q, c: c}
	b, isB := q.(listener.Batcher)
	w, isW := q.(listener.Waiter)
	switch {
	case isB && isW:
		return &batchWaitQueue{queue: base, b: b, w: w}
	case isB:
		return &batchQueue{queue: base, b: b}
	case isW:
		return &waitQueue{queue: base, w: w}
	default:
		return base
	}
}

type queue struct {
	q listener.Queue
	c *Counts
}

func (q *queue) Name() string { return q.q.Name() }

func (q *queue) Receive(ctx context.Context, max int, vis time.Duration) ([]*listener.Message, error) {
	q.c.Receive.Add(1)
	ms, err := q.q.Receive(ctx, max, vis)
	if err == nil && len(ms) == 0 {
		q.c.EmptyReceive.Add(1)
	}
	q.c.Received.Add(int64(len(ms)))
	return ms, err
}

func (q *queue) Delete(ctx context.Context, m *listener.Message) error {
	q.c.Delete.Add(1)
	return q.q.Delete(ctx, m)
}

func (q *queue) UpdateVisibility(ctx context.Context, m *listener.Message, d time.Duration) error {
	q.c.Update.Add(1)
	return q.q.UpdateVisibility(ctx, m, d)
}

func (q *queue) Send(ctx context.Context, body []byte, opts listener.SendOptions) (string, error) {
	q.c.Send.Add(1)
	return q.q.Send(ctx, body, opts)
}

func (q *queue) Depth(ctx context.Context) (int64, error) {
	q.c.Depth.Add(1)
	return q.q.Depth(ctx)
}

func (q *queue) deleteBatch(b listener.Batcher, ctx context.Context, ms []*listener.Message) []error {
	q.c.DeleteBatch.Add(1)
	return b.DeleteBatch(ctx, ms)
}

func (q *queue) wait(w listener.Waiter, ctx context.Context, d time.Duration) error {
	q.c.Wait.Add(1)
	return w.Wait(ctx, d)
}

type batchQueue struct {
	*queue
	b listener.Batcher
}

func (q *batchQueue) DeleteBatch(ctx context.Context, ms []*listener.Message) []error {
	return q.deleteBatch(q.b, ctx, ms)
}

type waitQueue struct {
	*queue
	w listener.Waiter
}

func (q *waitQueue) Wait(ctx context.Context, d time.Duration) error { return q.wait(q.w, ctx, d) }

type batchWaitQueue struct {
	*queue
	b listener.Batcher
	w listener.Waiter
}

func (q *batchWaitQueue) DeleteBatch(ctx context.Context, ms []*listener.Message) []error {
	return q.deleteBatch(q.b, ctx, ms)
}

func (q *batchWaitQueue) Wait(ctx context.Context, d time.Duration) error { return q.wait(q.w, ctx, d) }

// WrapPolling is Wrap without the Waiter capability: the listener then polls with its
// back-off, as it must on a backend that cannot wait (Azure).
func WrapPolling(q listener.Queue, c *Counts) listener.Queue {
	base := &queue{q: q, c: c}
	if b, ok := q.(listener.Batcher); ok {
		return &batchQueue{queue: base, b: b}
	}
	return base
}
