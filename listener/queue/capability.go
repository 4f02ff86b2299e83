package queue

import (
	"context"
	"time"

	"github.com/wqhost/wqhost/internal/wait"
)

// Batcher settles many messages in one call (one transaction, one fsync).
// Without it: one Delete per message.
type Batcher interface {
	// DeleteBatch deletes the messages and returns one error per message (nil on success).
	DeleteBatch(ctx context.Context, ms []*Message) []error
}

// BodyLimiter leaves a body above a size in its store on receive: the message is leased as
// usual but comes back with Body nil and Oversize set, so a message too large for its
// binding is never loaded into memory. Without it: the body is loaded, then the listener
// dead-letters it for its size all the same (memory is bounded by the backend's own limit).
type BodyLimiter interface {
	// ReceiveLimited is Receive, loading only bodies of at most maxBody bytes.
	ReceiveLimited(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*Message, error)
}

// Waiter blocks until a message may be available, so an idle listener costs no queue calls.
// A listener prefers a Watcher, then a FuncWatcher. Without any of the three: an idle push
// listener polls every Config.PushFallbackPoll, others back off between receives.
type Waiter interface {
	// Wait blocks until a message may be visible, ctx is done, or d elapsed (d <= 0: no
	// limit). It returns ctx.Err() when ctx ended, and nil otherwise.
	Wait(ctx context.Context, d time.Duration) error
}

// Watcher announces with a channel that a message may have become visible, so that an idle
// listener waits for it in its own select, with no goroutine blocked in Waiter.Wait.
// Without it: Waiter's fallback.
type Watcher interface {
	// Watch returns a channel closed by the next write to the queue (a send, a release, or
	// whatever else may make a message visible) and how long until a message is visible: 0
	// when one is now, the time until the earliest leased or delayed one is (with the real
	// clock), or -1 when only a write can make one visible. The channel is taken before
	// visibility is read, so a write that the answer does not show still closes it. stop ends
	// the watch; call it once the channel is no longer waited on. An error (the store could
	// not be read, or is closed) means the caller should receive and meet it there.
	Watch(ctx context.Context) (changed <-chan struct{}, visibleIn time.Duration, stop func(), err error)
}

// WaitWatching is Waiter.Wait built on w's Watch, for a backend that has a Watcher: it
// returns nil at once when a message is visible now (even if ctx ended) or the watch failed
// (the receive meets the error), and otherwise when the watch's channel is closed, the
// earliest leased or delayed message falls due, d elapsed (d <= 0: no limit) or ctx ended
// (then with ctx.Err()).
func WaitWatching(ctx context.Context, w Watcher, d time.Duration) error {
	changed, in, stop, err := w.Watch(ctx)
	defer stop()
	if err != nil || in == 0 {
		return nil
	}
	if in > 0 && (d <= 0 || in < d) {
		d = in + time.Millisecond // the millisecond: wake after it is due, not just before
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-wait.Timeout(d):
	}
	return nil
}

// FuncWatcher calls a function on the queue's next write, so that an idle push listener
// waits with no goroutine at all. Without it: Watcher's fallback.
type FuncWatcher interface {
	// WatchFunc registers fn to be called once by the next write to the queue (what would
	// close Watcher's channel) and returns how long until a message is visible, as Watch
	// does. fn is registered before visibility is read, so a write that the answer does not
	// show still calls it. fn runs in the writer's goroutine: it must not block nor call the
	// queue. stop unregisters fn if it has not run; it may be called more than once. An error
	// means the caller should receive and meet it there; fn is not registered then.
	WatchFunc(ctx context.Context, fn func()) (visibleIn time.Duration, stop func(), err error)
}

// Mover moves a leased message to another queue of the same store in one transaction: the
// listener dead-letters with it, so a message is dead-lettered once per lease — never twice
// by a redelivered copy whose first dead letter landed after the lease ran out. Without it
// (or on errors.ErrUnsupported): Send to the dead-letter queue, then Delete; a message whose
// body was left unread (Oversize) then stays and comes back, never sent empty.
type Mover interface {
	// MoveTo sends body with opts to dst and deletes the leased m atomically. It fails with
	// ErrLeaseLost, sending nothing, when m's lease is no longer held, and with
	// errors.ErrUnsupported when dst is not of the same store.
	MoveTo(ctx context.Context, m *Message, dst Queue, body []byte, opts SendOptions) error
}

// Renewer tells a lease renewal apart from a retry or a release (the ordered wrapper keeps a
// renewed message counted as leased). Without it: UpdateVisibility(m, VisibilityTimeout).
type Renewer interface {
	// Renew extends m's lease by d and stores the new lease token in m. It fails with
	// ErrLeaseLost if the lease already expired.
	Renew(ctx context.Context, m *Message, d time.Duration) error
}

// OrderedReceiver serves ordered execution groups from a queue with FIFO delivery.
// Without it: ordered mode is refused (listener.New fails naming the queue).
type OrderedReceiver interface {
	// ReceiveOrdered leases up to max visible messages of the lowest order group still in
	// the queue — every message counts, leased and delayed ones included — plus messages
	// that carry no order key. Groups are the integer values of the AttrOrderKey attribute,
	// lowest first. Bodies above maxBody (> 0) are left in the store as BodyLimiter does.
	// When it leases nothing but left visible messages of a higher group alone, heldUntil
	// is when the next message of the lowest group becomes visible (its lease expires or
	// its retry falls due); otherwise it is zero.
	ReceiveOrdered(ctx context.Context, max int, visibility time.Duration, maxBody int64) (msgs []*Message, heldUntil time.Time, err error)
}

// Releaser gives back a leased message whose handler never started (leased ahead and
// released at a stop, a scale-in or a batch cut short) without spending a delivery: its
// next receive shows the dequeue count it had before this lease, so a stop never pushes a
// message toward poison. Without it: UpdateVisibility(m, 0), which counts the lease as a
// delivery.
type Releaser interface {
	// Release makes m visible at once and takes its last delivery out of its dequeue count.
	// It fails with ErrLeaseLost when m's lease is no longer held.
	Release(ctx context.Context, m *Message) error
}

// Peeker shows messages without leasing or changing them, in receive order (max <= 0: the
// backend's maximum). Without it: peek is refused naming the queue.
type Peeker interface {
	Peek(ctx context.Context, max int) ([]*Message, error)
}

// Counts splits a queue's depth. Leased counts the messages received at least once that are
// not visible now (leased, or released with a retry delay); Delayed those never received
// that are not visible yet (sent with a delay).
type Counts struct {
	Visible, Leased, Delayed int64
}

// Counter splits the depth. Its Counts must cost no billed call (a read of the store): a
// listener holding work reads it every 250 ms to keep the depth it serves fresh. Without
// it: only Depth's total is known, read at most once a second.
type Counter interface {
	Counts(ctx context.Context) (Counts, error)
}

// MessageLimiter reports the backend's real per-message limit. Without it, or when it
// returns 0 or less: no limit below the binding's own max_message_bytes is known.
type MessageLimiter interface {
	// MaxMessageBytes is the largest body Send accepts, after the backend's encoding.
	MaxMessageBytes() int
}
