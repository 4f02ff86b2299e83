package adminqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wqhost/wqhost/listener/queue"
)

// Filter selects dead letters for a listing, a count, a purge or a redrive: every field set
// must hold.
//
// It becomes a queue.Filter, which a store with a queue.Scanner or queue.Sweeper evaluates
// where the dead letters are. The local store does it in SQL: the reason and version with
// json_extract on each row's attributes, the time range on the row's insertion time (when
// it entered the poison queue, which is when it was dead-lettered), the body with instr over
// the stored body. Without a filter a count reads the queue's index only; with one it reads
// every row of the poison queue (about 1 s per million dead letters, see docs/admin-api.md),
// and a body filter reads every candidate's whole body inside SQLite. Memory filters under
// its lock. A store without them (Azure, NATS) has its dead letters leased in batches and
// filtered in Go (scanLeasing, queue.Filter.Matches).
type Filter struct {
	// Reason is a substring of the reason the message was dead-lettered for.
	Reason string `json:"reason,omitempty"`
	// Version is the handler version that dead-lettered it (wqhost.handler_version), exactly.
	Version string `json:"version,omitempty"`
	// Since and Until bound when it was dead-lettered: Since <= at < Until; zero is open.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Body is a substring of the body (bytes).
	Body string `json:"body,omitempty"`
}

// Empty reports whether the filter selects every dead letter.
func (f Filter) Empty() bool { return f == Filter{} }

// contract is the filter in the contract's terms: a substring of the reason, the version
// exactly, the time bounds on when the message was dead-lettered, a substring of the body.
func (f Filter) contract() queue.Filter {
	qf := queue.Filter{From: f.Since, To: f.Until}
	if f.Reason != "" {
		qf.Attrs = append(qf.Attrs, queue.AttrFilter{Key: queue.AttrReason, Value: f.Reason, Contains: true})
	}
	if f.Version != "" {
		qf.Attrs = append(qf.Attrs, queue.AttrFilter{Key: queue.AttrHandlerVersion, Value: f.Version})
	}
	if f.Body != "" {
		qf.Body = []byte(f.Body)
	}
	return qf
}

func deadAt(m *queue.Message) time.Time {
	if at, err := time.Parse(time.RFC3339Nano, m.Attributes[queue.AttrDeadLetteredAt]); err == nil {
		return at
	}
	return m.InsertedAt
}

// Item is one dead letter as the admin API lists it: what the listener recorded, every
// attribute (wqhost.* included, whatever adds them), the body's size and a preview of it.
type Item struct {
	ID             string `json:"id"`
	Reason         string `json:"reason"`
	DequeueCount   int    `json:"dequeue_count"`
	DeadLetteredAt string `json:"dead_lettered_at"`
	HandlerVersion string `json:"handler_version,omitempty"`
	OriginalQueue  string `json:"original_queue,omitempty"`
	OriginalID     string `json:"original_id,omitempty"`
	// Size is the whole body's size in bytes.
	Size int64 `json:"size"`
	Preview
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Preview is a body cut to a size: the prefix as text in Body when it is UTF-8 (a rune cut
// at the end is dropped), else base64 in BodyBase64; Truncated when the body is longer.
type Preview struct {
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"body_base64,omitempty"`
	Truncated  bool    `json:"truncated"`
}

// PreviewOf is the preview of prefix, the first bytes of a body of size bytes.
func PreviewOf(prefix []byte, size int64) Preview {
	p := Preview{Truncated: int64(len(prefix)) < size}
	text := prefix
	if p.Truncated {
		// A rune cut by the prefix's end is not a reason to show the rest as base64.
		for i := 0; i < utf8.UTFMax-1 && len(text) > 0 && !utf8.Valid(text); i++ {
			text = text[:len(text)-1]
		}
	}
	if utf8.Valid(text) {
		s := string(text)
		p.Body = &s
	} else {
		p.BodyBase64 = prefix
	}
	return p
}

func itemOf(m *queue.Message, size int64) Item {
	a := m.Attributes
	n, _ := strconv.Atoi(a[queue.AttrDequeueCount])
	return Item{
		ID: m.ID, Reason: a[queue.AttrReason], DequeueCount: n, DeadLetteredAt: a[queue.AttrDeadLetteredAt],
		HandlerVersion: a[queue.AttrHandlerVersion], OriginalQueue: a[queue.AttrOriginalQueue], OriginalID: a[queue.AttrOriginalID],
		Size: size, Preview: PreviewOf(m.Body, size), Attributes: a,
	}
}

// Query pages a listing of dead letters.
type Query struct {
	Filter Filter
	// Limit is the most dead letters in the page (1..MaxPage; 0 means DefaultPage).
	Limit int
	// After is the cursor of the previous page ("" = the first page).
	After string
	// BodyBytes is how much of each body the page shows (0 = DefaultPreviewBytes, at most
	// MaxPreviewBytes).
	BodyBytes int64
}

// Page sizes and preview sizes of ListDead.
const (
	DefaultPage         = 50
	MaxPage             = 1000
	DefaultPreviewBytes = 120
	MaxPreviewBytes     = 64 << 10
)

// ErrBadQuery reports a query or filter a client got wrong (a size out of range); a cursor
// not given by the listing is queue.ErrBadCursor, which the admin API answers alike.
var ErrBadQuery = errors.New("bad query")

func (q *Query) normalize() error {
	switch {
	case q.Limit < 0 || q.Limit > MaxPage:
		return fmt.Errorf("%w: limit %d: want 1..%d", ErrBadQuery, q.Limit, MaxPage)
	case q.BodyBytes < 0 || q.BodyBytes > MaxPreviewBytes:
		return fmt.Errorf("%w: body_bytes %d: want 0..%d", ErrBadQuery, q.BodyBytes, MaxPreviewBytes)
	}
	if q.Limit == 0 {
		q.Limit = DefaultPage
	}
	if q.BodyBytes == 0 {
		q.BodyBytes = DefaultPreviewBytes
	}
	return nil
}

// ListDead returns one page of the dead letters of dead (a <queue>-poison queue) that
// q.Filter selects, newest first, and the cursor of the next page ("" after the last). On
// a store with a queue.Scanner the page is the store's (on the local store it walks the
// queue's index from the cursor and reads only the previewed prefix of each body);
// elsewhere see listScanning.
func ListDead(ctx context.Context, dead queue.Queue, q Query) (items []Item, next string, err error) {
	if err := q.normalize(); err != nil {
		return nil, "", err
	}
	items = []Item{}
	if s, ok := queue.As[queue.Scanner](dead); ok {
		o := queue.ScanOptions{Filter: q.Filter.contract(), After: q.After, Limit: q.Limit, Newest: true, BodyBytes: q.BodyBytes}
		next, err = s.Scan(ctx, o, func(m *queue.Message, size int64) error {
			items = append(items, itemOf(m, size))
			return nil
		})
		return items, next, err
	}
	return listScanning(ctx, dead, q)
}

// GetDead returns one dead letter of dead with a preview of up to bodyBytes (at most
// MaxPreviewBytes) of its body; ok false when there is none with that id.
func GetDead(ctx context.Context, dead queue.Queue, id string, bodyBytes int64) (it Item, ok bool, err error) {
	bodyBytes = min(max(bodyBytes, 0), MaxPreviewBytes)
	if s, isScanner := queue.As[queue.Scanner](dead); isScanner {
		o := queue.ScanOptions{Filter: queue.Filter{ID: id}, Limit: 1, BodyBytes: bodyBytes}
		_, err = s.Scan(ctx, o, func(m *queue.Message, size int64) error {
			it, ok = itemOf(m, size), true
			return nil
		})
		if err != nil {
			return Item{}, false, err
		}
		return it, ok, nil
	}
	err = scanLeasing(ctx, dead, func(m *queue.Message) (bool, error) {
		if m.ID == id {
			it, ok = itemOf(cut(m, bodyBytes)), true
		}
		return false, nil
	})
	return it, ok, err
}

// cut is m with its body cut to n bytes, and the whole body's size.
func cut(m *queue.Message, n int64) (*queue.Message, int64) {
	size := int64(len(m.Body))
	if m.Oversize > 0 {
		size = m.Oversize
	}
	c := *m
	c.Body = m.Body[:min(int64(len(m.Body)), n)]
	return &c, size
}

// CountDead counts the dead letters of dead that f selects (a redrive's or purge's dry run).
func CountDead(ctx context.Context, dead queue.Queue, f Filter) (int64, error) {
	qf := f.contract()
	if s, ok := queue.As[queue.Scanner](dead); ok {
		return s.CountMatching(ctx, qf)
	}
	var n int64
	err := scanLeasing(ctx, dead, func(m *queue.Message) (bool, error) {
		if qf.Matches(m) {
			n++
		}
		return false, nil
	})
	return n, err
}

// listScanning is ListDead on a store without a queue.Scanner: it scans every dead letter (leased
// while the scan runs, see scanLeasing) and keeps the Limit+1 newest by (dead-lettered
// time, id) before the cursor "t<ns>.<id>" that match the filter: a bounded selection, not
// the queue, so pages follow each other whatever order the backend returns messages in.
func listScanning(ctx context.Context, dead queue.Queue, q Query) ([]Item, string, error) {
	type keyed struct {
		t  int64
		id string
		it Item
	}
	newer := func(a, b keyed) bool { return a.t > b.t || a.t == b.t && a.id > b.id }
	var after *keyed
	if q.After != "" {
		t, id, ok := strings.Cut(strings.TrimPrefix(q.After, "t"), ".")
		n, err := strconv.ParseInt(t, 10, 64)
		if !ok || err != nil || !strings.HasPrefix(q.After, "t") {
			return nil, "", fmt.Errorf("cursor %.40q: %w", q.After, queue.ErrBadCursor)
		}
		after = &keyed{t: n, id: id}
	}
	var page []keyed
	qf := q.Filter.contract()
	err := scanLeasing(ctx, dead, func(m *queue.Message) (bool, error) {
		if !qf.Matches(m) {
			return false, nil
		}
		k := keyed{t: deadAt(m).UnixNano(), id: m.ID}
		if after != nil && !newer(*after, k) {
			return false, nil
		}
		i, _ := slices.BinarySearchFunc(page, k, func(a, b keyed) int {
			if newer(a, b) {
				return -1
			}
			return 1
		})
		if i <= q.Limit {
			k.it = itemOf(cut(m, q.BodyBytes))
			page = slices.Insert(page, i, k)
			page = page[:min(len(page), q.Limit+1)]
		}
		return false, nil
	})
	if err != nil {
		return nil, "", err
	}
	items, next := []Item{}, ""
	for i, k := range page {
		if i == q.Limit {
			last := page[i-1]
			next = fmt.Sprintf("t%d.%s", last.t, last.id)
			break
		}
		items = append(items, k.it)
	}
	return items, next, nil
}

// scanLeasing walks the dead letters of a store without a queue.Scanner (Azure, NATS), or
// without a queue.Sweeper for a purge or redrive (memory too): it
// leases them in batches and hands each one, body loaded, to fn once, which settles it
// (returns true: deleted or moved) or leaves it. The ones left stay leased until the walk
// ends, so a backend that puts a released message back at the head does not hand it out
// again, and are then released together, whole (on Azure a release rewrites the message
// with what it is given). The walk ends when a batch brings nothing new. Its limits: it
// holds every dead letter it scanned and left, bodies and all (Azure: at most 64 KiB each),
// so it is meant for dead-letter queues of thousands, not millions (the local store needs none);
// a dead letter leased by someone else is not seen; a walk longer than the lease (30 s)
// sees its first dead letters come back, and skips them as seen.
func scanLeasing(ctx context.Context, dead queue.Queue, fn func(m *queue.Message) (settled bool, err error)) error {
	seen := map[string]bool{}
	var held []*queue.Message
	release := func() error {
		var errs []error
		for _, m := range held {
			if err := dead.UpdateVisibility(context.WithoutCancel(ctx), m, 0); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
				errs = append(errs, fmt.Errorf("release %s: %w", m.ID, err))
			}
		}
		return errors.Join(errs...)
	}
	for {
		ms, err := dead.Receive(ctx, queue.MaxBatch, peekLease)
		if err != nil {
			return errors.Join(fmt.Errorf("%s: receive: %w", dead.Name(), err), release())
		}
		fresh := 0
		for _, m := range ms {
			if seen[m.ID] {
				held = append(held, m)
				continue
			}
			seen[m.ID] = true
			fresh++
			settled, err := fn(m)
			if err != nil {
				return errors.Join(err, release())
			}
			if !settled {
				held = append(held, m)
			}
		}
		if fresh == 0 {
			return release()
		}
	}
}
