// Package memory is an in-process queue.Backend for tests and benchmarks. Nothing is
// persisted. Each queue keeps its messages in a heap ordered by (visible time, sequence), so
// Receive, Delete and UpdateVisibility cost O(log n) under one short mutex hold.
package memory

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/wqhost/wqhost/internal/clock"
	"github.com/wqhost/wqhost/internal/wake"
	"github.com/wqhost/wqhost/listener/queue"
)

// Options configure a Backend.
type Options struct {
	// Clock tells the time of leases and delays (the project's one time hook,
	// internal/clock); nil means the system clock. With an injected clock Wait cannot arm
	// timers for leases and delays that expire: call Backend.Notify after advancing it.
	Clock clock.Clock
}

// Backend holds named in-memory queues. It is safe for concurrent use.
type Backend struct {
	now     func() time.Time
	realClk bool

	mu     sync.Mutex
	queues map[string]*Queue
	closed bool
}

var (
	_ queue.Backend     = (*Backend)(nil)
	_ queue.Queue       = (*Queue)(nil)
	_ queue.Batcher     = (*Queue)(nil)
	_ queue.Waiter      = (*Queue)(nil)
	_ queue.Watcher     = (*Queue)(nil)
	_ queue.FuncWatcher = (*Queue)(nil)
)

// New returns an empty Backend.
func New(opts Options) *Backend {
	b := &Backend{now: time.Now, realClk: opts.Clock == nil, queues: map[string]*Queue{}}
	if opts.Clock != nil {
		b.now = opts.Clock.Now
	}
	return b
}

// Open returns the named queue, creating it on first use.
func (b *Backend) Open(ctx context.Context, name string) (queue.Queue, error) {
	return b.Queue(ctx, name)
}

// Queue is Open with the concrete type, for callers that use Notify or Len.
func (b *Backend) Queue(_ context.Context, name string) (*Queue, error) {
	if name == "" {
		return nil, fmt.Errorf("memory: open queue: empty name")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("memory: open queue %q: backend closed", name)
	}
	q, ok := b.queues[name]
	if !ok {
		q = &Queue{name: name, b: b, byID: map[string]*item{}}
		b.queues[name] = q
	}
	return q, nil
}

// Notify wakes every waiter of every queue, so that they re-check visibility. Tests with an
// injected clock call it after advancing the clock.
func (b *Backend) Notify() {
	b.mu.Lock()
	qs := make([]*Queue, 0, len(b.queues))
	for _, q := range b.queues {
		qs = append(qs, q)
	}
	b.mu.Unlock()
	for _, q := range qs {
		q.mu.Lock()
		q.broadcastLocked()
		q.mu.Unlock()
	}
}

// Close marks the backend closed; open queues keep working until garbage collected.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

type item struct {
	id        string
	body      []byte
	attrs     map[string]string
	inserted  time.Time
	visible   int64 // unix nanos; 0 puts a released message at the head
	expires   int64 // unix nanos; 0 = never
	seq       uint64
	dequeues  int
	token     uint64
	leased    bool
	heapIndex int
}

type itemHeap []*item

func (h itemHeap) Len() int { return len(h) }
func (h itemHeap) Less(i, j int) bool {
	if h[i].visible != h[j].visible {
		return h[i].visible < h[j].visible
	}
	return h[i].seq < h[j].seq
}
func (h itemHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex = i
	h[j].heapIndex = j
}
func (h *itemHeap) Push(x any) {
	it := x.(*item)
	it.heapIndex = len(*h)
	*h = append(*h, it)
}
func (h *itemHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.heapIndex = -1
	return it
}

// Queue is one in-memory queue.
type Queue struct {
	name string
	b    *Backend

	mu     sync.Mutex
	heap   itemHeap
	byID   map[string]*item
	seq    uint64
	tokens uint64
	wake   wake.Set // the waiters until the next write
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Receive leases up to max visible messages, oldest visible first. The returned Body and
// Attributes share the stored message's memory: callers must treat them as read-only.
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*queue.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: receive from %s: %w", q.name, err)
	}
	if max < 1 {
		return nil, fmt.Errorf("memory: receive from %s: max %d < 1", q.name, max)
	}
	if max > queue.MaxBatch {
		max = queue.MaxBatch
	}
	now := q.b.now()
	nowN := now.UnixNano()
	until := now.Add(visibility)
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*queue.Message
	for len(out) < max && len(q.heap) > 0 {
		it := q.heap[0]
		if it.visible > nowN {
			break
		}
		if it.expires != 0 && it.expires <= nowN {
			heap.Pop(&q.heap)
			delete(q.byID, it.id)
			continue
		}
		q.tokens++
		it.token = q.tokens
		it.dequeues++
		it.leased = true
		it.visible = until.UnixNano()
		heap.Fix(&q.heap, 0)
		if out == nil {
			out = make([]*queue.Message, 0, min(max, len(q.heap)))
		}
		out = append(out, &queue.Message{
			ID:           it.id,
			Queue:        q.name,
			Body:         it.body,
			DequeueCount: it.dequeues,
			InsertedAt:   it.inserted,
			LeaseToken:   strconv.FormatUint(it.token, 36),
			VisibleAt:    until,
			Attributes:   it.attrs,
		})
	}
	if out == nil {
		out = []*queue.Message{}
	}
	return out, nil
}

// leasedLocked returns the item m holds a live lease on.
func (q *Queue) leasedLocked(m *queue.Message, nowN int64) (*item, error) {
	it, ok := q.byID[m.ID]
	if !ok {
		return nil, fmt.Errorf("memory: message %s in %s: %w", m.ID, q.name, queue.ErrLeaseLost)
	}
	if !it.leased || it.visible <= nowN || strconv.FormatUint(it.token, 36) != m.LeaseToken {
		return nil, fmt.Errorf("memory: message %s in %s: %w", m.ID, q.name, queue.ErrLeaseLost)
	}
	return it, nil
}

// Delete removes a leased message.
func (q *Queue) Delete(_ context.Context, m *queue.Message) error {
	nowN := q.b.now().UnixNano()
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deleteLocked(m, nowN)
}

func (q *Queue) deleteLocked(m *queue.Message, nowN int64) error {
	it, err := q.leasedLocked(m, nowN)
	if err != nil {
		return err
	}
	heap.Remove(&q.heap, it.heapIndex)
	delete(q.byID, it.id)
	return nil
}

// DeleteBatch deletes the messages under one lock and returns one error per message.
func (q *Queue) DeleteBatch(_ context.Context, ms []*queue.Message) []error {
	nowN := q.b.now().UnixNano()
	errs := make([]error, len(ms))
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, m := range ms {
		errs[i] = q.deleteLocked(m, nowN)
	}
	return errs
}

// UpdateVisibility moves a leased message's visibility to now+d and gives it a new lease
// token. d == 0 releases it to the head of the queue.
func (q *Queue) UpdateVisibility(_ context.Context, m *queue.Message, d time.Duration) error {
	return q.setVisible(m, d, false)
}

// setVisible is UpdateVisibility; uncount also takes the lease's delivery back (Release).
func (q *Queue) setVisible(m *queue.Message, d time.Duration, uncount bool) error {
	now := q.b.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	it, err := q.leasedLocked(m, now.UnixNano())
	if err != nil {
		return err
	}
	if uncount && it.dequeues > 0 {
		it.dequeues--
	}
	q.tokens++
	it.token = q.tokens
	until := now.Add(d)
	if d <= 0 {
		it.leased = false
		it.visible = 0
		until = now
	} else {
		it.visible = until.UnixNano()
	}
	heap.Fix(&q.heap, it.heapIndex)
	m.LeaseToken = strconv.FormatUint(it.token, 36)
	m.VisibleAt = until
	if d <= 0 {
		q.broadcastLocked()
	} else if q.b.realClk {
		// A waiter's timer may target an earlier time; it re-checks then.
		q.broadcastLocked()
	}
	return nil
}

// Send enqueues a message. The body is copied.
func (q *Queue) Send(_ context.Context, body []byte, opts queue.SendOptions) (string, error) {
	now := q.b.now()
	it := &item{
		body:     append([]byte(nil), body...),
		inserted: now,
		visible:  now.Add(opts.Delay).UnixNano(),
	}
	if len(opts.Attributes) > 0 {
		it.attrs = make(map[string]string, len(opts.Attributes))
		for k, v := range opts.Attributes {
			it.attrs[k] = v
		}
	}
	if opts.TTL > 0 {
		it.expires = now.Add(opts.TTL).UnixNano()
	}
	q.mu.Lock()
	q.seq++
	it.seq = q.seq
	it.id = strconv.FormatUint(it.seq, 10)
	heap.Push(&q.heap, it)
	q.byID[it.id] = it
	q.broadcastLocked()
	q.mu.Unlock()
	return it.id, nil
}

// Depth returns the number of stored messages, leased and delayed ones included.
func (q *Queue) Depth(context.Context) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.heap)), nil
}

func (q *Queue) broadcastLocked() { q.wake.Fire() }

// Watch implements queue.Watcher. The channel is closed by a Send or release, and by
// Backend.Notify; visibleIn is -1 for an empty queue and, with an injected clock, for one
// whose messages are all leased or delayed (call Backend.Notify after advancing the clock).
// stop does nothing: the channel costs a waiter nothing to drop.
func (q *Queue) Watch(context.Context) (changed <-chan struct{}, visibleIn time.Duration, stop func(), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake.Chan(), q.visibleInLocked(), func() {}, nil
}

// WatchFunc implements queue.FuncWatcher: fn is called once by the next Send, release or
// Backend.Notify (in the writer's goroutine, under the queue's lock), unless stop is called
// first. visibleIn is as Watch's.
func (q *Queue) WatchFunc(_ context.Context, fn func()) (visibleIn time.Duration, stop func(), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.visibleInLocked(), q.wake.Func(fn), nil
}

// visibleInLocked is how long until a message is visible: 0 when one is now, -1 when only a
// write (or, with an injected clock, Backend.Notify) can make one visible.
func (q *Queue) visibleInLocked() time.Duration {
	if len(q.heap) == 0 {
		return -1
	}
	nowN := q.b.now().UnixNano()
	switch {
	case q.heap[0].visible <= nowN:
		return 0
	case q.b.realClk:
		return time.Duration(q.heap[0].visible - nowN)
	}
	return -1
}

// Wait blocks until a message may be visible, ctx ends, or d elapses (d <= 0: no limit).
// With the real clock it also wakes when the earliest leased or delayed message becomes
// visible; with an injected clock the caller must call Backend.Notify after advancing it.
func (q *Queue) Wait(ctx context.Context, d time.Duration) error {
	return queue.WaitWatching(ctx, q, d)
}
