// Package offlinepoison are the operations on a tenant's dead letters that run without a host,
// through the config alone (the CLI's poison commands when no host runs on the data
// directory): list, requeue or purge them. Each opens the queues it needs on a backend of
// its own (backends.OpenQueues) and closes it on return; nothing is shared and nothing is
// locked. With a host running, the CLI goes through its admin API instead
// (host/internal/adminqueue).
package offlinepoison

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/internal/adminqueue"
	"github.com/wqhost/wqhost/host/internal/backends"
	"github.com/wqhost/wqhost/listener/queue"
)

// DeadLetter is one message of a <queue>-poison queue, with what the listener recorded.
type DeadLetter struct {
	ID string `json:"id"`
	// Body is the message's body when it is at most ListBodyBytes long (listing never reads
	// a larger one); BodyBytes is its size either way.
	Body           []byte `json:"body,omitempty"`
	BodyBytes      int64  `json:"body_bytes"`
	Reason         string `json:"reason"`
	OriginalID     string `json:"original_id"`
	OriginalQueue  string `json:"original_queue"`
	DequeueCount   int    `json:"dequeue_count"`
	DeadLetteredAt string `json:"dead_lettered_at"`
	HandlerVersion string `json:"handler_version,omitempty"`
	// Usage is the failing attempt's metering (docs/metering.md); nil on a dead letter
	// written without it (the listener's own refusals, older hosts).
	Usage      *Usage            `json:"usage,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
	// Repeats counts further dead letters of the same original message, listed as this
	// one: without transactions (Azure) a message whose lease ran out before its dead
	// letter's delete can be dead-lettered again by the listener that got it next.
	Repeats int `json:"repeats,omitempty"`
}

// ListBodyBytes is the largest body a listing of dead letters includes: a listing needs the
// metadata, and must not load a queue of large bodies into memory.
const ListBodyBytes = 4 << 10

func deadLetterOf(m *queue.Message) DeadLetter {
	a := m.Attributes
	n, _ := strconv.Atoi(a[queue.AttrDequeueCount])
	d := DeadLetter{
		ID: m.ID, BodyBytes: int64(len(m.Body)), Reason: a[queue.AttrReason], OriginalID: a[queue.AttrOriginalID],
		OriginalQueue: a[queue.AttrOriginalQueue], DequeueCount: n,
		DeadLetteredAt: a[queue.AttrDeadLetteredAt], HandlerVersion: a[queue.AttrHandlerVersion],
		Attributes: userAttributes(a), Usage: usageOf(a),
	}
	if m.Oversize > 0 {
		d.BodyBytes = m.Oversize
	} else if len(m.Body) <= ListBodyBytes {
		d.Body = m.Body
	}
	return d
}

// userAttributes keeps what the message came with: not the dead-letter bookkeeping, nor the
// metering figures (those are Usage).
func userAttributes(a map[string]string) map[string]string {
	out := adminqueue.UserAttributes(a)
	for k := range usageAttr {
		delete(out, k)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// peekLease is how long listing holds dead letters before releasing them.
const peekLease = 30 * time.Second

// withPoison opens tenant's <queue>-poison and runs fn on it.
func withPoison(ctx context.Context, cfg *config.Config, tenant, qname string, fn func(dead queue.Queue) error) error {
	qs, closer, err := backends.OpenQueues(ctx, cfg, tenant, strings.TrimSuffix(qname, config.PoisonSuffix)+config.PoisonSuffix)
	if err != nil {
		return err
	}
	defer closer.Close()
	return fn(qs[0])
}

// receiveUnread leases up to want messages of q, loading no body above maxBody where the
// queue can leave it in its store (local: queue.Message.Oversize).
func receiveUnread(ctx context.Context, q queue.Queue, want int, maxBody int64) ([]*queue.Message, error) {
	if bl, ok := queue.As[queue.BodyLimiter](q); ok {
		return bl.ReceiveLimited(ctx, want, peekLease, maxBody)
	}
	return q.Receive(ctx, want, peekLease)
}

// drain leases the visible messages of dead in batches and calls fn for each, which settles
// it or leaves it leased. At most limit messages (0 = all); it returns how many fn took.
// Bodies above maxBody are not loaded where the backend can leave them in its store, so a
// batch holds at most MaxBatch × maxBody bytes there (Azure: its 64 KiB message limit).
func drain(ctx context.Context, dead queue.Queue, limit int, maxBody int64, fn func(m *queue.Message) error) (int, error) {
	n := 0
	for limit <= 0 || n < limit {
		want := queue.MaxBatch
		if limit > 0 {
			want = min(want, limit-n)
		}
		ms, err := receiveUnread(ctx, dead, want, maxBody)
		if err != nil {
			return n, fmt.Errorf("%s: receive: %w", dead.Name(), err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if err := fn(m); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// ListOptions page a listing of dead letters.
type ListOptions struct {
	// Limit is the most dead letters listed; 0 lists all.
	Limit int
	// After continues an earlier listing: the cursor WalkDeadLetters returned.
	After string
}

// lister is a queue that can list its messages without leasing them (the local store):
// rows one at a time, bodies above maxBody left unread, a cursor to continue.
type lister interface {
	List(ctx context.Context, after string, max int, maxBody int64, fn func(*queue.Message) error) (string, error)
}

// WalkDeadLetters calls fn for the dead letters of tenant's queue (its <queue>-poison), in
// bounded memory: a body above ListBodyBytes is never loaded (BodyBytes gives its size),
// and each dead letter is handed to fn and dropped before the next is read. It returns a
// cursor for ListOptions.After when more follow the Limit, "" otherwise.
//
// On the local store the listing reads the rows without leasing them and the cursor is a
// position in the queue. Elsewhere (Azure) it leases the dead letters 32 at a time and
// releases each batch once listed (see walkLeasing); there the cursor is the insertion time
// of the last dead letter listed.
// fn sees repeats of one original message (Azure: see DeadLetter.Repeats) with Repeats -1.
func WalkDeadLetters(ctx context.Context, cfg *config.Config, tenant, qname string, opts ListOptions, fn func(DeadLetter) error) (next string, err error) {
	err = withPoison(ctx, cfg, tenant, qname, func(dead queue.Queue) error {
		seen := map[string]bool{} // original ids listed: their ids only, not their dead letters
		emit := func(m *queue.Message) error {
			d := deadLetterOf(m)
			if d.OriginalID != "" {
				if seen[d.OriginalID] {
					d.Repeats = -1
				}
				seen[d.OriginalID] = true
			}
			return fn(d)
		}
		if l, ok := dead.(lister); ok {
			var err error
			next, err = l.List(ctx, opts.After, opts.Limit, ListBodyBytes, emit)
			return err
		}
		return walkLeasing(ctx, dead, opts, emit, &next)
	})
	return next, err
}

// walkLeasing lists dead letters of a queue that has no cursor of its own (Azure): it
// leases a batch, takes the dead letters it has not seen, and releases the batch at once
// (whole: on Azure an update rewrites the message with the text it is given), so it holds
// one batch (at most 32 × 64 KiB on Azure) and the ids seen so far. A released message
// becomes visible after the ones not yet leased, so the walk ends when a batch brings
// nothing new. Without a Limit each dead letter is listed as it comes. With one, the walk
// keeps the Limit+1 first by (dead-lettered time, id) after the cursor "t<ns>.<id>" (a
// bounded selection, not the queue) and lists them in that order, so pages follow each
// other whatever order the service returns messages in.
func walkLeasing(ctx context.Context, dead queue.Queue, opts ListOptions, emit func(*queue.Message) error, next *string) error {
	type keyed struct {
		t int64
		m *queue.Message
	}
	less := func(a, b keyed) bool { return a.t < b.t || a.t == b.t && a.m.ID < b.m.ID }
	var after keyed
	if opts.After != "" {
		t, id, ok := strings.Cut(strings.TrimPrefix(opts.After, "t"), ".")
		n, err := strconv.ParseInt(t, 10, 64)
		if !ok || err != nil || !strings.HasPrefix(opts.After, "t") {
			return fmt.Errorf("%s: cursor %.40q: %w", dead.Name(), opts.After, queue.ErrBadCursor)
		}
		after = keyed{n, &queue.Message{ID: id}}
	}
	seen := map[string]bool{}
	var page []keyed // with a Limit: the first Limit+1 after the cursor, sorted
	for {
		ms, err := receiveUnread(ctx, dead, queue.MaxBatch, ListBodyBytes)
		if err != nil {
			return fmt.Errorf("%s: receive: %w", dead.Name(), err)
		}
		fresh := 0
		var errs []error
		for _, m := range ms {
			if seen[m.ID] {
				continue
			}
			seen[m.ID] = true
			fresh++
			d := &queue.Message{ID: m.ID, Attributes: m.Attributes, Body: m.Body}
			if len(m.Body) > ListBodyBytes {
				// Azure bodies (at most 64 KiB) arrive whole: list only the size.
				d = &queue.Message{ID: m.ID, Attributes: m.Attributes, Oversize: int64(len(m.Body))}
			}
			k := keyed{0, d}
			if at, err := time.Parse(time.RFC3339Nano, m.Attributes[queue.AttrDeadLetteredAt]); err == nil {
				k.t = at.UnixNano()
			}
			if opts.Limit <= 0 {
				errs = append(errs, emit(d))
				continue
			}
			if opts.After != "" && !less(after, k) {
				continue
			}
			i, _ := slices.BinarySearchFunc(page, k, func(a, b keyed) int {
				if less(a, b) {
					return -1
				}
				return 1
			})
			if i <= opts.Limit {
				page = slices.Insert(page, i, k)
				page = page[:min(len(page), opts.Limit+1)]
			}
		}
		for _, m := range ms {
			if rerr := dead.UpdateVisibility(ctx, m, 0); rerr != nil {
				errs = append(errs, fmt.Errorf("release %s: %w", m.ID, rerr))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if fresh == 0 {
			break
		}
	}
	for i, k := range page {
		if i == opts.Limit {
			last := page[i-1]
			*next = fmt.Sprintf("t%d.%s", last.t, last.m.ID)
			break
		}
		if err := emit(k.m); err != nil {
			return err
		}
	}
	return nil
}

// RequeueDeadLetters moves up to limit (0 = all) dead letters of tenant's queue back to the
// queue: each is sent again with its original attributes (the dead-letter bookkeeping
// dropped), then deleted from <queue>-poison. It returns how many moved. On the local store
// each moves in one transaction without its body being loaded, so a requeue runs in bounded
// memory whatever the bodies' sizes.
func RequeueDeadLetters(ctx context.Context, cfg *config.Config, tenant, qname string, limit int) (int, error) {
	qname = strings.TrimSuffix(qname, config.PoisonSuffix)
	qs, closer, err := backends.OpenQueues(ctx, cfg, tenant, qname, qname+config.PoisonSuffix)
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	dst, dead := qs[0], qs[1]
	// On Azure (no transactions) a message can be dead-lettered twice, by a listener whose
	// lease ran out before its delete and by the one that got the redelivery: repeats of one
	// original id are requeued once, the others only deleted.
	requeued := map[string]bool{}
	return drain(ctx, dead, limit, 0, func(m *queue.Message) error {
		return adminqueue.RequeueOne(ctx, dead, dst, qname, m, requeued)
	})
}

// PurgeDeadLetters deletes up to limit (0 = all) dead letters of tenant's queue and returns
// how many. It loads no body where the backend can leave it in its store (local).
func PurgeDeadLetters(ctx context.Context, cfg *config.Config, tenant, qname string, limit int) (int, error) {
	n := 0
	err := withPoison(ctx, cfg, tenant, qname, func(dead queue.Queue) error {
		var err error
		n, err = drain(ctx, dead, limit, 0, func(m *queue.Message) error {
			if err := dead.Delete(ctx, m); err != nil {
				return fmt.Errorf("purge %s: %w", m.ID, err)
			}
			return nil
		})
		return err
	})
	return n, err
}
