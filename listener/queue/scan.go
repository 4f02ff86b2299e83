package queue

import (
	"bytes"
	"context"
	"strings"
	"time"
)

// Filter selects messages for a Scanner or a Sweeper: every field set must hold. Its fields
// are what an operator asks of a queue's (mostly dead) messages: why and by which handler
// version they were dead-lettered (attributes), when, and what the body holds. Matches is
// its meaning in Go; a store evaluates it where the messages are (local: in SQL, reading
// no body into Go), which is the point of the capabilities.
type Filter struct {
	// ID, when set, selects only the message with that id.
	ID string
	// Attrs are conditions on the message's attributes.
	Attrs []AttrFilter
	// From and To bound the message's time: From <= time < To; a zero bound is open. The
	// time is when the message was dead-lettered (AttrDeadLetteredAt) where it carries that
	// attribute, else InsertedAt. A store may use the time the message entered the queue
	// instead (local): the listener's dead-lettering makes the two the same moment.
	From, To time.Time
	// Body, when not empty, must occur in the body (bytes). It costs reading every
	// candidate's whole body, in the store: a store checks the other conditions first.
	Body []byte
	// Live leaves out messages whose time to live ran out, which a store may still hold
	// (and list) until it drops them.
	Live bool
}

// AttrFilter is a condition on one attribute: equal to Value, or containing it.
type AttrFilter struct {
	Key, Value string
	Contains   bool
}

// Matches reports whether m, body loaded, meets f (Live is left to the store, which alone
// knows a message's expiry): the reference a Scanner is tested against and the filter of a
// caller without one.
func (f Filter) Matches(m *Message) bool {
	if f.ID != "" && m.ID != f.ID {
		return false
	}
	for _, a := range f.Attrs {
		v, ok := m.Attributes[a.Key]
		if !ok || a.Contains && !strings.Contains(v, a.Value) || !a.Contains && v != a.Value {
			return false
		}
	}
	if !f.From.IsZero() || !f.To.IsZero() {
		at := f.timeOf(m)
		if !f.From.IsZero() && at.Before(f.From) || !f.To.IsZero() && !at.Before(f.To) {
			return false
		}
	}
	return len(f.Body) == 0 || bytes.Contains(m.Body, f.Body)
}

func (f Filter) timeOf(m *Message) time.Time {
	if at, err := time.Parse(time.RFC3339Nano, m.Attributes[AttrDeadLetteredAt]); err == nil {
		return at
	}
	return m.InsertedAt
}

// ScanOptions ask a Scanner for one page.
type ScanOptions struct {
	// Filter selects the messages listed.
	Filter Filter
	// After is the cursor Scan returned for the previous page ("" = from the start). A
	// cursor is the store's own; one it did not give fails with ErrBadCursor.
	After string
	// Limit is the most messages in the page; <= 0 lists all.
	Limit int
	// Newest lists from the end of the scan order backwards (the latest dead letters first).
	Newest bool
	// BodyBytes is how much of each body the page holds (the prefix; <= 0: none), so a
	// listing of large bodies costs what it shows.
	BodyBytes int64
}

// Scanner lists a queue's messages without leasing or changing them, filtered by the store
// and paged by cursor, leased and delayed ones included: what an admin listing needs of a
// dead-letter queue of millions. Pages follow the store's scan order (local and memory:
// receive order), which a message keeps while it is neither received nor released, so
// pages of a queue nobody receives from hold every match once. Without it:
// a listing uses Peeker (one page, no cursor, no filter), and a dead-letter listing, count,
// purge or redrive leases the messages in batches and filters them with Filter.Matches
// (host/internal/adminqueue).
type Scanner interface {
	// Scan calls fn for the page of messages o selects, in scan order, each with at most
	// o.BodyBytes of its body (Oversize 0) and its whole body's size, and returns the
	// cursor that continues after the page, "" when no more match. An error of fn ends the
	// scan and is returned.
	Scan(ctx context.Context, o ScanOptions, fn func(m *Message, size int64) error) (next string, err error)
	// CountMatching counts the messages f selects.
	CountMatching(ctx context.Context, f Filter) (int64, error)
}

// Sweeper deletes or moves the messages a filter selects inside the store, chunk by chunk,
// bodies unread, each chunk one short transaction: a purge or redrive of millions of dead
// letters that neither loads them nor holds up the store's other users. Without it: the
// messages are leased in batches, filtered with Filter.Matches and deleted, or sent again
// and deleted (Mover where there is one), one at a time.
type Sweeper interface {
	// Sweep starts a walk over the messages f selects now (ones sent after it are never
	// taken, so a redrive does not take back what it moved, failed again) and returns it
	// with their count.
	Sweep(ctx context.Context, f Filter) (Sweep, int64, error)
}

// Sweep is one walk of a Sweeper. A message leased when its chunk is taken (a reader holds
// it) is found but left. found 0 means the walk is over. It is not safe for concurrent use.
type Sweep interface {
	// Delete deletes the next chunk of at most n messages (the store may take fewer).
	Delete(ctx context.Context, n int) (found, deleted int, err error)
	// MoveTo moves the next chunk of at most n messages to dst as new messages (a fresh
	// dequeue count) with their attributes less the keys drop. It fails with
	// errors.ErrUnsupported, moving nothing, when dst is not a queue of the same store.
	MoveTo(ctx context.Context, n int, dst Queue, drop []string) (found, moved int, err error)
}

// Unwrap returns q without its decorators (the queues that have an Unwrap method, as
// Decorator does): a store recognises its own queue under them.
func Unwrap(q Queue) Queue {
	for {
		u, ok := q.(interface{ Unwrap() Queue })
		if !ok {
			return q
		}
		q = u.Unwrap()
	}
}
