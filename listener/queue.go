// Package listener runs the auto-scaling batch queue listener: dequeue workers that receive
// leased batches from a Queue, hand each message to a Handler, and settle it (delete, release
// with a delay, or dead-letter) as the configured policies decide.
//
// The package knows nothing of WebAssembly. It defines the interfaces it consumes: Queue and
// Backend (implemented by the backends in listener/memory, listener/local and listener/azure),
// Handler, and the policies Backoff, Scaler and PoisonPolicy (built-ins live in plugins/).
package listener

import (
	"context"
	"errors"
	"time"
)

// MaxBatch is the largest number of messages one Receive may return. It is Azure Queue
// Storage's limit, and every backend honours it so that a binding behaves the same on all.
const MaxBatch = 32

// PoisonSuffix is appended to a queue's name to form its dead-letter queue.
const PoisonSuffix = "-poison"

// Attribute keys that the listener writes on dead-lettered messages. Backends that store
// attributes natively keep them beside the body; others (Azure) carry them in an envelope.
const (
	AttrReason         = "wqhost.reason"
	AttrOriginalID     = "wqhost.original_id"
	AttrOriginalQueue  = "wqhost.original_queue"
	AttrDequeueCount   = "wqhost.dequeue_count"
	AttrDeadLetteredAt = "wqhost.dead_lettered_at"
	AttrHandlerVersion = "wqhost.handler_version"
	// AttrOrderKey carries the ordered-execution group of a message, where a binding uses
	// ordered mode.
	AttrOrderKey = "wqhost.order"
)

// ErrLeaseLost is returned by Delete and UpdateVisibility when the message's lease token is
// no longer valid: its visibility timeout expired and another receiver may hold it.
var ErrLeaseLost = errors.New("lease lost")

// ErrNotFound is returned when a message id or queue does not exist.
var ErrNotFound = errors.New("not found")

// Message is one leased message. Receive fills every field; the listener treats it as
// read-only except LeaseToken, which UpdateVisibility replaces.
type Message struct {
	// ID identifies the message within its queue for its whole life.
	ID string
	// Queue is the name of the queue the message was received from.
	Queue string
	// Body is the payload, already decoded by the backend.
	Body []byte
	// DequeueCount counts the receives of this message, this one included.
	DequeueCount int
	// InsertedAt is when the message was first enqueued.
	InsertedAt time.Time
	// LeaseToken proves the current lease (Azure's pop receipt). It changes on every receive
	// and every visibility update.
	LeaseToken string
	// VisibleAt is when the lease expires and the message becomes receivable again.
	VisibleAt time.Time
	// Attributes are optional string properties (dead-letter metadata, order key).
	Attributes map[string]string
	// Oversize, when above 0, is the size of a body the backend left in its store because it
	// was above the receive's body limit (see BodyLimiter): Body is nil. The listener
	// dead-letters such a message without handing it to the handler, and a Mover moves the
	// stored body with it.
	Oversize int64
}

// SendOptions control Send.
type SendOptions struct {
	// Delay keeps the new message invisible for this long.
	Delay time.Duration
	// TTL drops the message after this long; zero means never expire.
	TTL time.Duration
	// Attributes are stored with the message where the backend can.
	Attributes map[string]string
}

// Queue is one named queue with lease-based (transactional) receive: Delete commits a
// message, UpdateVisibility(0) aborts (releases it to the head), a positive visibility
// retries it later or renews the lease of a message still being processed.
//
// Implementations must be safe for concurrent use.
type Queue interface {
	// Name returns the queue's name.
	Name() string
	// Receive leases up to max (1..MaxBatch) visible messages for the visibility timeout.
	// An empty queue returns an empty slice and no error.
	Receive(ctx context.Context, max int, visibility time.Duration) ([]*Message, error)
	// Delete removes a leased message. It fails with ErrLeaseLost if the lease expired.
	Delete(ctx context.Context, m *Message) error
	// UpdateVisibility makes a leased message visible again after d (0 = now) and stores the
	// new lease token in m.LeaseToken. It fails with ErrLeaseLost if the lease expired.
	UpdateVisibility(ctx context.Context, m *Message, d time.Duration) error
	// Send enqueues a new message and returns its id.
	Send(ctx context.Context, body []byte, opts SendOptions) (string, error)
	// Depth returns the approximate number of messages in the queue, leased ones included.
	Depth(ctx context.Context) (int64, error)
}

// Batcher is implemented by queues that can settle many messages in one call (one
// transaction, one fsync). The listener uses it when present.
type Batcher interface {
	// DeleteBatch deletes the messages and returns one error per message (nil on success).
	DeleteBatch(ctx context.Context, ms []*Message) []error
}

// BodyLimiter is implemented by queues that can leave a body above a size in their store on
// receive (the local backend): the message is leased as usual but comes back with Body nil
// and Oversize set, so a message too large for its binding is never loaded into memory.
type BodyLimiter interface {
	// ReceiveLimited is Receive, loading only bodies of at most maxBody bytes.
	ReceiveLimited(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*Message, error)
}

// Waiter is implemented by queues that can block until a message may be available, so an
// idle listener costs no queue calls (local and memory backends). A listener prefers a
// queue's Watcher; it calls Wait, in a goroutine of the idle wait, only on a queue without one.
type Waiter interface {
	// Wait blocks until a message may be visible, ctx is done, or d elapsed (d <= 0: no
	// limit). It returns ctx.Err() when ctx ended, and nil otherwise.
	Wait(ctx context.Context, d time.Duration) error
}

// Watcher is implemented by queues that announce with a channel that a message may have
// become visible (local and memory backends), so that an idle listener waits for it in its own
// select, with no goroutine blocked in Waiter.Wait.
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

// FuncWatcher is implemented by queues that can call a function on their next write (local
// and memory backends), so that an idle push listener waits with no goroutine at all.
type FuncWatcher interface {
	// WatchFunc registers fn to be called once by the next write to the queue (what would
	// close Watcher's channel) and returns how long until a message is visible, as Watch
	// does. fn is registered before visibility is read, so a write that the answer does not
	// show still calls it. fn runs in the writer's goroutine: it must not block nor call the
	// queue. stop unregisters fn if it has not run; it may be called more than once. An error
	// means the caller should receive and meet it there; fn is not registered then.
	WatchFunc(ctx context.Context, fn func()) (visibleIn time.Duration, stop func(), err error)
}

// Backend opens named queues of one store or account.
type Backend interface {
	// Open returns the named queue, creating it if the backend is configured to.
	Open(ctx context.Context, name string) (Queue, error)
	// Close releases the backend's resources.
	Close() error
}
