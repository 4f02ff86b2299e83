// Package queue is the contract between a queue backend and the listener, as
// database/sql/driver is for database/sql: the Message, the required Queue and Backend
// interfaces, the optional capabilities (each documents the fallback used without it), and
// the errors. A backend (listener/memory, local, azure) implements it and imports nothing
// else of wqhost's listener; the listener (package listener) consumes it.
//
// Optional capabilities are discovered with As (or Of), never with a bare type assertion: a
// wrapper over other queues (listener/sharded, the listener's ordered mode) implements every
// capability's methods and advertises with Capabilities the ones all its inner queues have,
// so one concrete wrapper type serves every combination. listener/queuetest proves a
// backend or wrapper against the whole contract: each capability passes or is absent, and
// the listener's fallback for it is tested.
package queue

import (
	"context"
	"errors"
	"time"
)

// MaxBatch is the largest number of messages one Receive may return. It is Azure Queue
// Storage's limit, and every backend honours it so that a binding behaves the same on all.
const MaxBatch = 32

// MaxVisibility is the longest lease or retry delay a message can be given: Azure Queue
// Storage's longest visibility timeout. A poison policy's retry delay is capped at it.
const MaxVisibility = 7 * 24 * time.Hour

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
	// AttrReleased counts the deliveries of a message that were released unstarted
	// (Releaser) on a backend whose own dequeue count cannot be lowered and that rewrites
	// attributes on an update (azure): its DequeueCount is the backend's count less it.
	// A dead letter does not carry it (its dequeue count is already the corrected one).
	AttrReleased = "wqhost.released"
)

// Attribute keys of the failing attempt's metering figures, which the host writes on a dead
// letter beside the ones above (docs/metering.md has the units): decimal integers.
const (
	AttrFuel         = "wqhost.fuel"          // fuel units
	AttrWallUs       = "wqhost.wall_us"       // wall time in the guest, microseconds
	AttrHostUs       = "wqhost.host_us"       // of which waiting in host calls, microseconds
	AttrMemoryBytes  = "wqhost.memory_bytes"  // linear memory high-water mark, bytes
	AttrHTTPRequests = "wqhost.http_requests" // outbound requests
	AttrHTTPBytes    = "wqhost.http_bytes"    // outbound request + response body bytes
	// AttrBatchSize is set when the attempt was a batch call of that many messages, whose
	// figures (but memory) were divided among them.
	AttrBatchSize = "wqhost.batch_size"
	// AttrAttempts is the message's attempts this host saw, latest last (at most 10): a JSON
	// array of {"at","wall_us","fuel","outcome","reason"} (docs/metering.md).
	AttrAttempts = "wqhost.attempts"
)

// ErrLeaseLost is returned by Delete and UpdateVisibility when the message's lease token is
// no longer valid: its visibility timeout expired and another receiver may hold it.
var ErrLeaseLost = errors.New("lease lost")

// ErrUnavailable marks, wrapped, an error that waiting may fix: the backend cannot be
// reached or cannot serve now (no server answers, a cluster without quorum, a timeout, a
// server error). A host starting beside such a backend keeps trying to open it; any other
// error of an open is permanent (a bad config or credentials) and fails the start.
var ErrUnavailable = errors.New("backend unavailable")

// ErrNotFound is returned when a message id or queue does not exist.
var ErrNotFound = errors.New("not found")

// ErrBadCursor is returned, wrapped, by a listing given a cursor that is not one the queue
// gave: a caller's mistake, not the queue's (the CLI's usage error, the admin API's 400).
var ErrBadCursor = errors.New("not a cursor this queue gave")

// ErrUnsendable is returned, wrapped, by Send and SendBatch for a body the backend cannot
// carry: above its per-message size after its encoding (MessageLimiter), or not valid under
// that encoding (binary under Azure's text encoding). Nothing is sent. It is the body's
// fault, not the queue's: the CLI's usage error, the admin API's 400.
var ErrUnsendable = errors.New("the queue cannot carry this body")

// Message is one leased message. Receive fills every field; the listener treats it as
// read-only except LeaseToken, which UpdateVisibility replaces.
type Message struct {
	// ID identifies the message within its queue for its whole life.
	ID string
	// Queue is the name of the queue that holds the message (behind a wrapper, the physical
	// queue: a shard's). ID is unique within it.
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
	// DedupID names this send so that a backend that can drops a repeat of it: nats keeps
	// one message per id within its stream's duplicate window (Nats-Msg-Id, two minutes);
	// the others ignore it. The host names each output after the message it came from and
	// its place among that message's outputs, so outputs sent again after a crash between
	// sending them and settling their message reach the output queue once.
	DedupID string
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

// Backend opens named queues of one store or account.
type Backend interface {
	// Open returns the named queue, creating it if the backend is configured to.
	Open(ctx context.Context, name string) (Queue, error)
	// Close releases the backend's resources.
	Close() error
}
