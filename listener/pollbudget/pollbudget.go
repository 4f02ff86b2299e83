// Package pollbudget shares one rate of idle receives among the listeners of a backend that
// must poll (Azure Queue Storage bills every receive, empty or not): a budget of calls per
// hour across all of them, instead of a back-off timer per listener.
//
// A listener that finds its queue empty enrols (Queue.Enrol) and makes its next receive when
// the budget grants it. One goroutine per Budget grants one receive per Interval (3600 s ÷
// calls per hour), and runs only while some listener waits; a waiting listener holds no timer.
// Grants alternate between two shares:
//
//   - the fair share goes to the waiting queue polled least recently (the one that has waited
//     longest since its last receive), which bounds every queue's wait: with n queues sharing
//     the budget, no queue waits longer than Bound(n) = MinInterval + 2·n·Interval, and
//     n·Interval while no queue had recent activity (the other share then has nothing to do
//     and its grants go to the fair share too);
//   - the activity share goes to queues that found messages recently (Queue.Found), most
//     overdue first: a queue last active at a and enrolled at j is due at
//     j + max(MinInterval, j − a), so after a burst it is polled at about a+m, a+2m, a+4m, …
//     (m = MinInterval), the exponential back-off a listener would make alone, within the
//     budget. Its grants go to the fair share when no such queue is due.
//
// No queue is granted a receive sooner than MinInterval after it enrolled. A grant that finds
// no eligible queue is not saved up, so the budget is a ceiling: fewer idle queues than
// MinInterval ÷ Interval cannot spend it all.
package pollbudget

import (
	"container/heap"
	"container/list"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/internal/clock"
	"github.com/wqhost/wqhost/internal/defaults"
)

// DefaultMinInterval is Options.MinInterval's default: the listener's own shortest idle
// delay (listener.DefaultMinIdle).
const DefaultMinInterval = 100 * time.Millisecond

// MaxCallsPerHour bounds Options.CallsPerHour: 10,000 idle receives a second, half of an
// Azure storage account's documented 20,000 requests a second.
const MaxCallsPerHour = defaults.MaxIdleCallsPerHour // 36,000,000

// Options configure a Budget.
type Options struct {
	// CallsPerHour is the rate of idle receives granted across all queues, 1..MaxCallsPerHour.
	CallsPerHour int
	// MinInterval is the shortest time between a queue's enrolment and its grant; default
	// DefaultMinInterval.
	MinInterval time.Duration
	// Clock is the time source; nil means the real clock. A test whose listeners do real
	// network I/O (so testing/synctest cannot hold them) steps a fake one.
	Clock clock.Clock
}

// Budget grants idle receives to the queues that share it. Create it with New; it needs no
// closing (its goroutine ends when no queue waits).
type Budget struct {
	clock   clock.Clock
	every   time.Duration
	minGap  time.Duration
	kick    chan struct{} // buffered 1: the last waiter left, the goroutine may end
	mu      sync.Mutex
	fifo    list.List  // waiting queues, in enrolment order: least recently polled first
	active  activeHeap // waiting queues with an activity due time, earliest first
	running bool       // the granting goroutine runs
	next    time.Time  // the next grant slot
	turn    uint64     // grants made: even turns are the fair share's
	grants  atomic.Uint64
}

// New returns a Budget, or an error naming the bad option.
func New(o Options) (*Budget, error) {
	if o.CallsPerHour < 1 || o.CallsPerHour > MaxCallsPerHour {
		return nil, fmt.Errorf("pollbudget: CallsPerHour %d is outside 1..%d", o.CallsPerHour, MaxCallsPerHour)
	}
	switch {
	case o.MinInterval < 0:
		return nil, fmt.Errorf("pollbudget: MinInterval %s is negative", o.MinInterval)
	case o.MinInterval == 0:
		o.MinInterval = DefaultMinInterval
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return &Budget{
		clock: o.Clock, every: time.Hour / time.Duration(o.CallsPerHour), minGap: o.MinInterval,
		kick: make(chan struct{}, 1),
	}, nil
}

// Interval is the time between two grants.
func (b *Budget) Interval() time.Duration { return b.every }

// Bound is the longest a queue waits for its grant when n queues share the budget: a fair
// grant at least every other Interval, and at most n−1 queues enrolled before it.
func (b *Budget) Bound(n int) time.Duration {
	return b.minGap + 2*time.Duration(max(n, 1))*b.every
}

// Waiting returns the number of queues enrolled and not yet granted.
func (b *Budget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fifo.Len()
}

// Grants returns the number of receives granted so far.
func (b *Budget) Grants() uint64 { return b.grants.Load() }

// Queue returns a new place in the budget for one listener's queue: its
// listener.Config.IdlePacer. A Queue costs the budget nothing while it is not enrolled.
func (b *Budget) Queue() *Queue {
	return &Queue{b: b, grant: make(chan struct{}, 1), idx: -1}
}

// Queue is one listener's place in a Budget. Its methods are safe for concurrent use, but a
// listener has at most one enrolment at a time.
type Queue struct {
	b          *Budget
	grant      chan struct{} // buffered 1
	lastActive atomic.Int64  // unix nanos of the last Found, on the budget's clock; 0: never

	// Guarded by b.mu.
	elem   *list.Element // in b.fifo while enrolled
	idx    int           // in b.active, or -1
	joined time.Time
	due    time.Time // the activity share's due time
}

// Enrol puts the queue in line for its next idle receive and returns the channel that
// receives when the receive may be made. Call Withdraw when the wait ends, granted or not.
// Enrolling again while enrolled keeps the place.
func (q *Queue) Enrol() <-chan struct{} {
	b := q.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if q.elem != nil {
		return q.grant
	}
	select {
	case <-q.grant: // a grant never taken nor withdrawn: not a receive of this enrolment
	default:
	}
	q.joined = b.clock.Now()
	q.elem = b.fifo.PushBack(q)
	if a := q.lastActive.Load(); a != 0 {
		q.due = q.joined.Add(max(b.minGap, q.joined.Sub(time.Unix(0, a))))
		heap.Push(&b.active, q)
	}
	if !b.running {
		b.running = true
		go b.run()
	}
	return q.grant
}

// Withdraw ends the queue's wait: it leaves the line if it was not granted, and a grant it did
// not take is dropped (the receive it paid for is not made).
func (q *Queue) Withdraw() {
	b := q.b
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-q.grant:
	default:
	}
	if q.elem == nil {
		return
	}
	b.removeLocked(q)
	if b.fifo.Len() == 0 {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// Found reports that a receive of the queue found messages: its next idle receives come
// from the activity share.
func (q *Queue) Found() {
	q.lastActive.Store(q.b.clock.Now().UnixNano())
}

func (b *Budget) removeLocked(q *Queue) {
	b.fifo.Remove(q.elem)
	q.elem = nil
	if q.idx >= 0 {
		heap.Remove(&b.active, q.idx)
	}
}

// run grants one receive per interval while a queue waits, and ends when none does.
func (b *Budget) run() {
	for {
		b.mu.Lock()
		if b.fifo.Len() == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		now := b.clock.Now()
		// A slot missed by more than one interval (no queue was eligible, or the goroutine
		// ran late) is not saved up: the rate holds over any window.
		if now.Sub(b.next) > b.every {
			b.next = now
		}
		var wait time.Duration
		if now.Before(b.next) {
			wait = b.next.Sub(now)
		} else if q := b.pickLocked(now); q != nil {
			b.removeLocked(q)
			select {
			case q.grant <- struct{}{}: // buffered 1 and emptied by Enrol: never full here
			default:
			}
			b.grants.Add(1)
			b.turn++
			b.next = b.next.Add(b.every)
			b.mu.Unlock()
			continue
		} else {
			// The longest-waiting queue enrolled less than MinInterval ago; no other is due
			// sooner.
			head := b.fifo.Front().Value.(*Queue)
			wait = head.joined.Add(b.minGap).Sub(now)
		}
		b.mu.Unlock()
		select {
		case <-b.clock.After(wait):
		case <-b.kick:
		}
	}
}

// pickLocked returns the queue to grant at now, or nil when none is eligible.
func (b *Budget) pickLocked(now time.Time) *Queue {
	if b.turn%2 == 1 && len(b.active) > 0 && !b.active[0].due.After(now) {
		return b.active[0]
	}
	head := b.fifo.Front().Value.(*Queue)
	if head.joined.Add(b.minGap).After(now) {
		return nil
	}
	return head
}

// activeHeap orders the waiting queues with recent activity by due time.
type activeHeap []*Queue

func (h activeHeap) Len() int           { return len(h) }
func (h activeHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h activeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}

func (h *activeHeap) Push(x any) {
	q := x.(*Queue)
	q.idx = len(*h)
	*h = append(*h, q)
}

func (h *activeHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	q.idx = -1
	return q
}
