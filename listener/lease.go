package listener

import (
	"context"
	"errors"
	"time"

	"github.com/wqhost/wqhost/internal/wait"
	"github.com/wqhost/wqhost/listener/queue"
)

// Lease budget. A listener holds at most HandlerSlots+Prefetch leased messages that are not
// yet settled (unstarted, running, or waiting for their delete or dead letter), across all
// its workers: a message is leased only when it can
// start promptly. Messages received beyond what the handlers can run would sit leased and
// unstarted while their leases run down (and, at a crash, all of them come back as
// duplicates or delays), so receives are sized to the free budget, the way Azure Functions
// fetches a new batch only when in-flight work drops below a threshold.
//
// A worker waits until at least min(BatchSize, Prefetch) slots are free before it receives,
// so that receives stay batched (one call for many messages) while the handler slots are
// kept busy by the prefetched messages.
type leaseBudget struct {
	slots  chan struct{} // one token per leased message not yet finished; capacity = budget
	gather chan struct{} // a lock held while gathering, so partial holdings cannot deadlock; a channel so a waiting worker can give up when ctx ends
	min    int           // tokens a worker waits for before it receives
}

func newLeaseBudget(size, minTake int) *leaseBudget {
	return &leaseBudget{slots: make(chan struct{}, size), gather: make(chan struct{}, 1), min: max(min(minTake, size), 1)}
}

// leaseGate is a Limiter's optional extension that gates leasing (see Limiter).
type leaseGate interface {
	LeaseRoom(held int) (room int, wake <-chan struct{}, recheck time.Duration)
}

// take blocks until at least the budget's minimum (capped at want) of lease slots is free,
// takes up to want, and returns how many it took; 0 when ctx ended first. With a gate,
// it first waits until the gate leaves room, and takes no more than that room.
func (lb *leaseBudget) take(ctx context.Context, want int, gate leaseGate) int {
	select {
	case lb.gather <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	defer func() { <-lb.gather }()
	for gate != nil {
		// Under the gather lock: workers ask one at a time, so two cannot both use the
		// same room.
		room, wake, recheck := gate.LeaseRoom(len(lb.slots))
		if room != 0 {
			if room > 0 {
				want = min(want, room)
			}
			break
		}
		select {
		case <-wake:
		case <-wait.Timeout(recheck):
		case <-ctx.Done():
			return 0
		}
	}
	n, need := 0, min(lb.min, want)
	for n < need {
		select {
		case lb.slots <- struct{}{}:
			n++
		case <-ctx.Done():
			lb.put(n)
			return 0
		}
	}
	return lb.grab(n, want)
}

// tryTake takes up to want lease slots without waiting, within the gate's room; it returns
// how many it took (0 when the budget or the gate holds them). It needs the gather lock only
// for a limited room, which two takers must not both use: it never waits for slots, so it
// cannot hold a partial take that blocks another, and a worker waiting in take for budget
// (holding the lock) must not end a batch that is gathering.
func (lb *leaseBudget) tryTake(want int, gate leaseGate) int {
	if gate != nil {
		room, _, _ := gate.LeaseRoom(len(lb.slots))
		switch {
		case room == 0:
			return 0
		case room > 0:
			select {
			case lb.gather <- struct{}{}:
			default:
				return 0 // another taker is using the room
			}
			defer func() { <-lb.gather }()
			room, _, _ = gate.LeaseRoom(len(lb.slots)) // again, under the lock
			if room == 0 {
				return 0
			}
			if room > 0 {
				want = min(want, room)
			}
		}
	}
	return lb.grab(0, want)
}

// grab takes free slots, without waiting, until it holds want (it holds n already); it
// returns how many it holds.
func (lb *leaseBudget) grab(n, want int) int {
	for ; n < want; n++ {
		select {
		case lb.slots <- struct{}{}:
		default:
			return n
		}
	}
	return n
}

// put returns n slots.
func (lb *leaseBudget) put(n int) {
	for range n {
		<-lb.slots
	}
}

// free returns the number of slots free now.
func (lb *leaseBudget) free() int { return cap(lb.slots) - len(lb.slots) }

// held returns the number of slots taken.
func (lb *leaseBudget) held() int { return len(lb.slots) }

// renewLease extends m's lease by the visibility timeout.
func (l *Listener) renewLease(ctx context.Context, m *queue.Message) error {
	if l.renewer != nil {
		return l.renewer.Renew(ctx, m, l.cfg.VisibilityTimeout)
	}
	return l.q.UpdateVisibility(ctx, m, l.cfg.VisibilityTimeout)
}

// releaseLease gives m back to the queue at once. unstarted says its handler never ran:
// then the lease is not counted as a delivery where the queue can take it back (Releaser).
func (l *Listener) releaseLease(ctx context.Context, m *queue.Message, unstarted bool) error {
	if unstarted && l.releaser != nil {
		if err := l.releaser.Release(ctx, m); !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	return l.q.UpdateVisibility(ctx, m, 0)
}

// retryAfter gives m back to the queue to be received again after d.
func (l *Listener) retryAfter(ctx context.Context, m *queue.Message, d time.Duration) error {
	return l.q.UpdateVisibility(ctx, m, d)
}
