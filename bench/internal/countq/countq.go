// Package countq wraps a queue.Queue to count every call made to it: the cost model of a
// hosted queue (Azure bills each request as one storage transaction, empty receives
// included), applied to every backend so the consumers can be compared on equal terms.
package countq

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
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

// Wrap returns q counting into c. It embeds queue.Decorator, so it advertises exactly q's
// capabilities and the listener takes the same code paths as with q.
func Wrap(q queue.Queue, c *Counts) queue.Queue {
	return &counted{Decorator: queue.Decorator{Queue: q}, c: c}
}

// WrapPolling is Wrap without the wake-up capabilities: the listener then polls with its
// back-off, as it must on a backend that cannot wait (Azure).
func WrapPolling(q queue.Queue, c *Counts) queue.Queue {
	return &counted{Decorator: queue.Decorator{Queue: q}, c: c, polling: true}
}

type counted struct {
	queue.Decorator
	c       *Counts
	polling bool // wake-ups withheld
}

// Capabilities implements queue.Advertiser.
func (q *counted) Capabilities() queue.Caps {
	cs := q.Decorator.Capabilities()
	if q.polling {
		cs &^= queue.CapWait | queue.CapWatch | queue.CapWatchFunc
	}
	return cs
}

func (q *counted) Receive(ctx context.Context, max int, vis time.Duration) ([]*queue.Message, error) {
	q.c.Receive.Add(1)
	ms, err := q.Queue.Receive(ctx, max, vis)
	if err == nil && len(ms) == 0 {
		q.c.EmptyReceive.Add(1)
	}
	q.c.Received.Add(int64(len(ms)))
	return ms, err
}

func (q *counted) Delete(ctx context.Context, m *queue.Message) error {
	q.c.Delete.Add(1)
	return q.Queue.Delete(ctx, m)
}

func (q *counted) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	q.c.Update.Add(1)
	return q.Queue.UpdateVisibility(ctx, m, d)
}

func (q *counted) Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error) {
	q.c.Send.Add(1)
	return q.Queue.Send(ctx, body, opts)
}

func (q *counted) Depth(ctx context.Context) (int64, error) {
	q.c.Depth.Add(1)
	return q.Queue.Depth(ctx)
}

func (q *counted) DeleteBatch(ctx context.Context, ms []*queue.Message) []error {
	q.c.DeleteBatch.Add(1)
	return q.Decorator.DeleteBatch(ctx, ms)
}

func (q *counted) Wait(ctx context.Context, d time.Duration) error {
	q.c.Wait.Add(1)
	return q.Decorator.Wait(ctx, d)
}
