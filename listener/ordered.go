package listener

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wqhost/wqhost/internal/wait"
	"github.com/wqhost/wqhost/listener/queue"
)

// ordered returns q in ordered mode (Config.Ordered): messages of one order group (AttrOrderKey) are handed
// out together and may run concurrently, and a message of group N+1 is not even received
// until every message of group N has been settled (deleted, or dead-lettered, which deletes
// it) — a group-N message waiting for its retry still holds N+1 back.
//
// The gate is the queue itself, so it cannot deadlock the listener: held messages stay in
// the queue instead of taking workers, handler slots or dequeue counts, and the messages of
// the lowest group are always receivable. The returned queue is also a Waiter that wakes an
// idle listener when this process settles the last message it leased, so the next group
// starts at once (with or without Push). A listener's own delayed retries wake it as usual;
// settlements by another process are seen at the next poll (without Push), so an ordered
// queue is meant to be consumed by one host.
//
// q must implement OrderedReceiver; otherwise ordered fails naming the queue.
func ordered(q queue.Queue) (queue.Queue, error) {
	r, ok := queue.As[queue.OrderedReceiver](q)
	if !ok {
		return nil, fmt.Errorf("queue %q: ordered mode needs a backend with FIFO delivery that implements ordered receive (local, nats)", q.Name())
	}
	o := &orderedQueue{Decorator: queue.Decorator{Queue: q}, r: r, wake: make(chan struct{}), leased: map[string]struct{}{}}
	o.batcher, _ = queue.As[queue.Batcher](q)
	o.waiter, _ = queue.As[queue.Waiter](q)
	return o, nil
}

type orderedQueue struct {
	queue.Decorator // Peek, Scan, Counts and MaxMessageBytes of q; Capabilities narrows the rest
	r               queue.OrderedReceiver
	batcher         queue.Batcher // nil if q has none
	waiter          queue.Waiter  // nil if q has none

	mu        sync.Mutex
	heldUntil time.Time           // the last receive found nothing but held messages back until then
	heldGen   uint64              // gen at that receive
	gen       uint64              // counts wakes
	leased    map[string]struct{} // ids leased by this process and not yet settled
	wake      chan struct{}       // closed and replaced when leased becomes empty
}

// Capabilities implements queue.Advertiser: its own batch delete, wait and renewal, a body
// limit (every OrderedReceiver has one), and the moves, peeks, scans, counts and size limit
// of q. q's Watcher and FuncWatcher are withheld: they would report held-back messages
// visible; so is its Sweeper, whose deletes would bypass the leased set.
func (o *orderedQueue) Capabilities() queue.Caps {
	own := queue.CapBatch | queue.CapWait | queue.CapRenew | queue.CapBodyLimit
	return own | queue.Of(o.Queue)&(queue.CapMove|queue.CapPeek|queue.CapScan|queue.CapCount|queue.CapMaxBytes|queue.CapRelease)
}

// Receive implements Queue with ReceiveOrdered.
func (o *orderedQueue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*queue.Message, error) {
	return o.ReceiveLimited(ctx, max, visibility, 0)
}

// ReceiveLimited implements queue.BodyLimiter with ReceiveOrdered's body limit, so an
// oversize message is dead-lettered in ordered mode without its body being read.
func (o *orderedQueue) ReceiveLimited(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*queue.Message, error) {
	// The generation is taken before the receive: a settle that lands while it runs (the
	// listener deletes the last batch alongside the next receive) must still wake Wait.
	o.mu.Lock()
	gen := o.gen
	o.mu.Unlock()
	msgs, heldUntil, err := o.r.ReceiveOrdered(ctx, max, visibility, maxBody)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.heldUntil, o.heldGen = heldUntil, gen
	for _, m := range msgs {
		o.leased[m.ID] = struct{}{}
	}
	o.mu.Unlock()
	return msgs, nil
}

// settled forgets leased messages and wakes waiters once none is left.
func (o *orderedQueue) settled(ids ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.leased)
	for _, id := range ids {
		delete(o.leased, id)
	}
	if n > 0 && len(o.leased) == 0 {
		o.gen++
		close(o.wake)
		o.wake = make(chan struct{})
	}
}

// Delete implements Queue.
func (o *orderedQueue) Delete(ctx context.Context, m *queue.Message) error {
	err := o.Queue.Delete(ctx, m)
	if err == nil || isLeaseLost(err) {
		o.settled(m.ID)
	}
	return err
}

// DeleteBatch implements Batcher (one message at a time when q has no batch delete).
func (o *orderedQueue) DeleteBatch(ctx context.Context, ms []*queue.Message) []error {
	var errs []error
	if o.batcher != nil {
		errs = o.batcher.DeleteBatch(ctx, ms)
	} else {
		errs = make([]error, len(ms))
		for i, m := range ms {
			errs[i] = o.Queue.Delete(ctx, m)
		}
	}
	ids := make([]string, 0, len(ms))
	for i, m := range ms {
		if errs[i] == nil || isLeaseLost(errs[i]) {
			ids = append(ids, m.ID)
		}
	}
	o.settled(ids...)
	return errs
}

// UpdateVisibility implements Queue: a release or a retry, which ends this process's
// lease of the message either way. Renewals come through Renew.
func (o *orderedQueue) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	err := o.Queue.UpdateVisibility(ctx, m, d)
	if err == nil || isLeaseLost(err) {
		o.settled(m.ID)
	}
	return err
}

// Release implements Releaser when the queue below does: it ends this process's lease as
// UpdateVisibility does.
func (o *orderedQueue) Release(ctx context.Context, m *queue.Message) error {
	r, ok := queue.As[queue.Releaser](o.Queue)
	if !ok {
		return errors.ErrUnsupported
	}
	err := r.Release(ctx, m)
	if err == nil || isLeaseLost(err) {
		o.settled(m.ID)
	}
	return err
}

// MoveTo implements Mover when the queue below does (local): a dead letter moved in one
// transaction settles the message as a delete does. Without it a message whose body was
// left unread (Message.Oversize) could not be dead-lettered in ordered mode.
func (o *orderedQueue) MoveTo(ctx context.Context, m *queue.Message, dst queue.Queue, body []byte, opts queue.SendOptions) error {
	mv, ok := queue.As[queue.Mover](o.Queue)
	if !ok {
		return errors.ErrUnsupported
	}
	err := mv.MoveTo(ctx, m, dst, body, opts)
	if err == nil || isLeaseLost(err) {
		o.settled(m.ID)
	}
	return err
}

// Renew implements Renewer: the message stays leased by this process, so the next group
// stays held back. Only a lost lease releases it.
func (o *orderedQueue) Renew(ctx context.Context, m *queue.Message, d time.Duration) error {
	err := o.Queue.UpdateVisibility(ctx, m, d)
	if isLeaseLost(err) {
		o.settled(m.ID)
	}
	return err
}

// Wait implements Waiter. While messages are held behind a lower group, the backend's own
// waiter would report them visible at once, so the wait ends when this process settles the
// last message it leased (since the receive that held them back), when the lowest group's
// next message becomes visible (a retry falling due), or on ctx or d.
func (o *orderedQueue) Wait(ctx context.Context, d time.Duration) error {
	o.mu.Lock()
	heldUntil, wake := o.heldUntil, o.wake
	held := !heldUntil.IsZero()
	if held && o.gen != o.heldGen {
		o.mu.Unlock()
		return nil // a wake came between that receive and this wait
	}
	o.mu.Unlock()
	if held {
		until := time.Until(heldUntil) + time.Millisecond
		if until <= 0 {
			return nil
		}
		if d <= 0 || until < d {
			d = until
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var inner chan struct{}
	if o.waiter != nil && !held {
		inner = make(chan struct{})
		go func() {
			defer close(inner)
			_ = o.waiter.Wait(wctx, d)
		}()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-inner:
	case <-wait.Timeout(d):
	}
	return nil
}

func isLeaseLost(err error) bool { return err != nil && errors.Is(err, queue.ErrLeaseLost) }

var (
	_ queue.Advertiser     = (*orderedQueue)(nil)
	_ queue.Batcher        = (*orderedQueue)(nil)
	_ queue.BodyLimiter    = (*orderedQueue)(nil)
	_ queue.Waiter         = (*orderedQueue)(nil)
	_ queue.Renewer        = (*orderedQueue)(nil)
	_ queue.Mover          = (*orderedQueue)(nil)
	_ queue.Peeker         = (*orderedQueue)(nil)
	_ queue.Counter        = (*orderedQueue)(nil)
	_ queue.MessageLimiter = (*orderedQueue)(nil)
)
