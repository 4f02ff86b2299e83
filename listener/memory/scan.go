package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// Scan implements queue.Scanner: the scan order is receive order, (visible time, sequence),
// as Peek and the local store list; the cursor is the last message's "<visible>.<seq>"; the
// filter is Filter.Matches on the stored message. It selects under the queue's lock and
// copies only the page's body prefixes.
func (q *Queue) Scan(ctx context.Context, o queue.ScanOptions, fn func(m *queue.Message, size int64) error) (string, error) {
	var after item
	if o.After != "" {
		v, sq, ok := strings.Cut(o.After, ".")
		var e1, e2 error
		after.visible, e1 = strconv.ParseInt(v, 10, 64)
		after.seq, e2 = strconv.ParseUint(sq, 10, 64)
		if !ok || e1 != nil || e2 != nil {
			return "", fmt.Errorf("memory: scan %s: cursor %.40q: %w", q.name, o.After, queue.ErrBadCursor)
		}
	}
	order := func(a, b *item) int { return cmp.Or(cmp.Compare(a.visible, b.visible), cmp.Compare(a.seq, b.seq)) }
	if o.Newest {
		order = func(a, b *item) int { return cmp.Or(cmp.Compare(b.visible, a.visible), cmp.Compare(b.seq, a.seq)) }
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	type found struct {
		m    *queue.Message
		size int64
	}
	q.mu.Lock()
	var items []*item
	for _, it := range q.matching(o.Filter) {
		if o.After == "" || order(it, &after) > 0 {
			items = append(items, it)
		}
	}
	slices.SortFunc(items, order)
	next := ""
	if o.Limit > 0 && len(items) > o.Limit {
		items = items[:o.Limit]
		last := items[len(items)-1]
		next = strconv.FormatInt(last.visible, 10) + "." + strconv.FormatUint(last.seq, 10)
	}
	page := make([]found, len(items))
	for i, it := range items {
		page[i] = found{q.view(it, o.BodyBytes), int64(len(it.body))}
	}
	q.mu.Unlock()
	for _, f := range page {
		if err := fn(f.m, f.size); err != nil {
			return "", err
		}
	}
	return next, nil
}

// CountMatching implements queue.Scanner.
func (q *Queue) CountMatching(ctx context.Context, f queue.Filter) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.matching(f))), nil
}

// matching returns the stored messages f selects, in no order. q.mu is held.
func (q *Queue) matching(f queue.Filter) []*item {
	now := q.b.now().UnixNano()
	var out []*item
	for _, it := range q.heap {
		if f.Live && it.expires != 0 && it.expires <= now {
			continue
		}
		m := queue.Message{ID: it.id, Body: it.body, InsertedAt: it.inserted, Attributes: it.attrs}
		if f.Matches(&m) {
			out = append(out, it)
		}
	}
	return out
}

// view is it as a listing shows it: at most prefix bytes of the body, copies of the body
// and attributes. q.mu is held.
func (q *Queue) view(it *item, prefix int64) *queue.Message {
	m := &queue.Message{ID: it.id, Queue: q.name, Body: append([]byte{}, it.body[:min(int64(len(it.body)), max(prefix, 0))]...),
		DequeueCount: it.dequeues, InsertedAt: it.inserted}
	if it.visible > 0 {
		m.VisibleAt = time.Unix(0, it.visible)
	}
	if it.attrs != nil {
		m.Attributes = make(map[string]string, len(it.attrs))
		for k, v := range it.attrs {
			m.Attributes[k] = v
		}
	}
	return m
}
