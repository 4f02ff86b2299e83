package host

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/internal/adminqueue"
	"github.com/wqhost/wqhost/host/internal/backends"
	"github.com/wqhost/wqhost/host/internal/offlinepoison"
	"github.com/wqhost/wqhost/listener/queue"
)

// OpenQueue opens a tenant's queue (its tenant-local name, e.g. "transactions" or
// "transactions-poison") through the same config a running host uses, without starting
// anything: for `wqhost send` and the poison commands. Close the returned Closer when done
// (it closes the backend). Note that a memory backend is private to this call.
func OpenQueue(ctx context.Context, cfg *config.Config, tenant, queue string) (queue.Queue, io.Closer, error) {
	qs, closer, err := backends.OpenQueues(ctx, cfg, tenant, queue)
	if err != nil {
		return nil, nil, err
	}
	return qs[0], closer, nil
}

// OpenQueue opens a tenant's queue on the running host's own backends (the same store, and
// for a memory backend the same queues the bindings use).
func (h *Host) OpenQueue(ctx context.Context, tenant, queue string) (queue.Queue, error) {
	bname, err := h.live.Load().QueueBackend(tenant, queue)
	if err != nil {
		return nil, fmt.Errorf("open queue %s/%s: %w", tenant, queue, err)
	}
	if err := backends.CheckOwnQueue(h.cfg, tenant, bname, strings.TrimSuffix(queue, config.PoisonSuffix)); err != nil {
		return nil, fmt.Errorf("open queue %s/%s: %w", tenant, queue, err)
	}
	b, err := h.backs.Get(ctx, bname)
	if err != nil {
		return nil, err
	}
	return b.Open(ctx, h.cfg.PhysicalQueue(tenant, bname, queue))
}

// The operations on a tenant's queues that run through the config alone, without a host
// (the CLI's poison commands), live in host/internal/offlinepoison; those the admin API runs on a
// host's own queues (and the CLI's peek) in host/internal/adminqueue. These are their names
// in package host.

// DeadLetter is one message of a <queue>-poison queue, with what the listener recorded.
type DeadLetter = offlinepoison.DeadLetter

// ListOptions page a listing of dead letters (WalkDeadLetters).
type ListOptions = offlinepoison.ListOptions

// ListBodyBytes is the largest body a listing of dead letters includes: a listing needs the
// metadata, and must not load a queue of large bodies into memory.
const ListBodyBytes = offlinepoison.ListBodyBytes

// Peeker is implemented by queues that can show their messages without leasing or changing
// them (the local, memory and Azure backends). max <= 0 asks for the backend's maximum.
type Peeker = queue.Peeker

// WalkDeadLetters calls fn for the dead letters of tenant's queue (its <queue>-poison), in
// bounded memory: a body above ListBodyBytes is never loaded. It returns a cursor for
// ListOptions.After when more follow the Limit, "" otherwise (see
// offlinepoison.WalkDeadLetters).
func WalkDeadLetters(ctx context.Context, cfg *config.Config, tenant, queue string, opts ListOptions, fn func(DeadLetter) error) (next string, err error) {
	return offlinepoison.WalkDeadLetters(ctx, cfg, tenant, queue, opts, fn)
}

// RequeueDeadLetters moves up to limit (0 = all) dead letters of tenant's queue back to the
// queue, with their original attributes, and returns how many moved (see
// offlinepoison.RequeueDeadLetters).
func RequeueDeadLetters(ctx context.Context, cfg *config.Config, tenant, queue string, limit int) (int, error) {
	return offlinepoison.RequeueDeadLetters(ctx, cfg, tenant, queue, limit)
}

// PurgeDeadLetters deletes up to limit (0 = all) dead letters of tenant's queue and returns
// how many. It loads no body where the backend can leave it in its store (local).
func PurgeDeadLetters(ctx context.Context, cfg *config.Config, tenant, queue string, limit int) (int, error) {
	return offlinepoison.PurgeDeadLetters(ctx, cfg, tenant, queue, limit)
}

// PeekItem is one message as StreamPeek shows it: its body cut to a preview, and its size.
type PeekItem = adminqueue.PeekItem

// StreamPeek calls fn for up to limit (0: all) messages of tenant's queue in receive order,
// without consuming them, each with at most bodyBytes of its body. On the local store it
// reads one row at a time and only each body's prefix, so it runs in bounded memory
// whatever the queue and its bodies hold (see adminqueue.PeekQueue).
func StreamPeek(ctx context.Context, cfg *config.Config, tenant, queue string, limit int, bodyBytes int64, fn func(PeekItem) error) error {
	q, closer, err := OpenQueue(ctx, cfg, tenant, queue)
	if err != nil {
		return err
	}
	defer closer.Close()
	if _, err := adminqueue.PeekQueue(ctx, q, "", limit, bodyBytes, fn); err != nil {
		return fmt.Errorf("peek %s/%s: %w", tenant, queue, err)
	}
	return nil
}

// Preview is a body cut to a size, as text or base64 (see adminqueue.Preview).
type Preview = adminqueue.Preview

// MaxPreviewBytes is the most of a body a peek or dead-letter listing shows.
const MaxPreviewBytes = adminqueue.MaxPreviewBytes

// DeadLetterItem is one dead letter as the admin API lists it (GET .../deadletters).
type DeadLetterItem = adminqueue.Item

// DeadLetterOfItem is a dead letter of the admin API's listing as WalkDeadLetters gives it:
// the body only when the preview holds all of it, the attributes less the listener's
// bookkeeping.
func DeadLetterOfItem(it DeadLetterItem) DeadLetter {
	d := DeadLetter{
		ID: it.ID, BodyBytes: it.Size, Reason: it.Reason, OriginalID: it.OriginalID, OriginalQueue: it.OriginalQueue,
		DequeueCount: it.DequeueCount, DeadLetteredAt: it.DeadLetteredAt, HandlerVersion: it.HandlerVersion,
		Attributes: adminqueue.UserAttributes(it.Attributes),
	}
	if !it.Truncated {
		switch {
		case it.Body != nil:
			d.Body = []byte(*it.Body)
		case it.BodyBase64 != nil:
			d.Body = it.BodyBase64
		default:
			d.Body = []byte{}
		}
	}
	return d
}
