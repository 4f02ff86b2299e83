package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/internal/wake"
	"github.com/wqhost/wqhost/listener/queue"
)

// Limiter gates handler calls: tenant caps and the host-wide fair share are built on it.
//
// A Limiter that also has the method
//
//	LeaseRoom(held int) (room int, wake <-chan struct{}, recheck time.Duration)
//
// gates leasing too: before each receive the listener asks it how many more messages it may
// lease while held are leased and not yet settled (negative: no limit); when it returns 0 or
// less than held allows, the listener asks again once wake is closed or recheck has passed
// (recheck 0: only wake). A binding held back (its circuit breaker open) thus leaves its
// messages in the queue, their dequeue counts untouched, instead of leasing them to wait
// idle for a handler slot.
type Limiter interface {
	// Acquire blocks until one more handler call may run, or ctx ends (then it returns an
	// error and the call does not run).
	Acquire(ctx context.Context) error
	// Release returns the slot taken by a successful Acquire.
	Release()
}

// depthEvery bounds how often the listener asks a queue without a Counter (azure) for its
// depth: Depth is a billed call there. depthEveryCounted is the bound over a queue.Counter,
// whose split is a free read of the store (local, memory: one query; nats: a consumer
// info): the depth a status page or an autoscaler reads is then never older than it (plus
// the read) while the listener holds work (depths.go).
const (
	depthEvery        = time.Second
	depthEveryCounted = 250 * time.Millisecond
)

// Listener drains one queue with an auto-scaling set of dequeue workers. Create it with New
// and start it with Run or Start.
type Listener struct {
	cfg     Config
	q       queue.Queue
	batcher queue.Batcher     // nil when the queue has none
	waiter  queue.Waiter      // nil when the queue cannot block
	watcher queue.Watcher     // nil when the queue cannot announce a change on a channel
	fwatch  queue.FuncWatcher // nil when the queue cannot call back on a change
	// canDoze: an idle listener waits dormant, with no goroutine (dormant.go): push, no
	// IdlePacer, and the queue's wake-ups (if any) come by callback.
	canDoze bool
	renewer queue.Renewer // nil when renewal is a plain UpdateVisibility
	counter queue.Counter // nil when the queue knows only its total depth
	bh      BatchHandler  // the handler, when Config.Batch is on
	budget  *leaseBudget
	gate    leaseGate // the Limiter, when it gates leasing too
	log     *slog.Logger

	// depthEvery is how often the depth is read at most: depthEveryCounted with a counter.
	depthEvery time.Duration
	// releaser takes an unstarted message's lease back uncounted; nil when the queue cannot.
	releaser queue.Releaser

	notifyCh  chan struct{} // Notify: buffered 1
	rescaleCh chan struct{} // a worker handed back its slot: buffered 1
	emptyCh   chan struct{} // the last worker stopped (push): buffered 1
	unparkCh  chan struct{} // wakes parked workers; capacity MaxWorkers

	mu      sync.Mutex
	active  int  // workers holding a slot, parked ones included
	parked  int  // workers waiting for a fan-out without calling the queue
	waiting bool // one worker is in peek mode (idle wait or error back-off)
	wg      sync.WaitGroup
	running atomic.Bool

	// Shutdown: stopping is set when Run's context ends; handlers run on hctx, cancelled
	// when the grace period is over.
	stopping atomic.Bool
	hctx     context.Context
	hcancel  context.CancelFunc
	unstop   func() bool   // unregisters the AfterFunc that sets stopping
	done     chan struct{} // closed once the listener stopped, after err is set
	err      error         // what Run returns

	dorm       atomic.Pointer[dormant] // the current dormant spell, nil while awake
	quietUntil atomic.Int64            // unix nanos: end of the idle quiet after spurious wake-ups, 0 = none set

	// errStreak counts the failed rounds of receives (recovery.go), listener-wide;
	// errCounted is when it last advanced (unix nanos).
	errStreak  atomic.Int64
	errCounted atomic.Int64
	// recovery is fired by the first sign that the queue serves again: it ends every
	// sleeping error back-off at once. recov is the queue's own signal, nil without one.
	recovery  wake.Set
	recov     recoverer
	depthAt   atomic.Int64 // unix nanos of the last Depth call
	scaledAt  atomic.Int64 // unix nanos of the last scaler question (desired)
	depthTick atomic.Bool  // the depth timer is armed (depths.go)
	deadAt    atomic.Int64 // unix nanos of the last dead-letter Depth call
	nextDue   atomic.Int64 // earliest retry this listener scheduled (unix nanos), 0 = none
	spurious  atomic.Int32 // consecutive wake-ups that found nothing
	// dueWake: the last idle wait ended for a retry of ours falling due. A receive that
	// then finds nothing (the queue's clock a hair behind ours) is no spurious wake-up.
	dueWake     atomic.Bool
	callLat     atomic.Int64 // slowest recent queue call (nanos, decaying): sets the renewal margin
	lastReceive atomic.Int64 // unix nanos of the last receive: the push fallback poll counts from it
	taking      atomic.Int32 // workers waiting for lease budget: they take what settling frees

	c    counters
	hist latencyHist
}

type counters struct {
	depth, peak, inFlight, activeW                               atomic.Int64
	processed, failed, retried, poisoned                         atomic.Uint64
	receives, emptyReceives, deletes, updates, sends, errorCalls atomic.Uint64
	depthQueries, leasesLost, helpers, released                  atomic.Uint64
	deadDepth                                                    atomic.Int64
	deadDirty                                                    atomic.Bool
	leasedIdle, peakLeasedIdle                                   atomic.Int64
	counts                                                       atomic.Pointer[queue.Counts] // the last split read (Counter), nil before
}

// New validates cfg and returns a Listener. Errors name the offending field.
func New(cfg Config) (*Listener, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Listener{
		cfg:       c,
		q:         c.Queue,
		log:       c.Logger,
		notifyCh:  make(chan struct{}, 1),
		rescaleCh: make(chan struct{}, 1),
		emptyCh:   make(chan struct{}, 1),
		unparkCh:  make(chan struct{}, c.MaxWorkers),
		done:      make(chan struct{}),
	}
	l.batcher, _ = queue.As[queue.Batcher](c.Queue)
	l.waiter, _ = queue.As[queue.Waiter](c.Queue)
	l.watcher, _ = queue.As[queue.Watcher](c.Queue)
	l.fwatch, _ = queue.As[queue.FuncWatcher](c.Queue)
	l.canDoze = c.Push && c.IdlePacer == nil && (l.fwatch != nil || l.watcher == nil && l.waiter == nil)
	l.renewer, _ = queue.As[queue.Renewer](c.Queue)
	l.counter, _ = queue.As[queue.Counter](c.Queue)
	l.releaser, _ = queue.As[queue.Releaser](c.Queue)
	l.depthEvery = depthEvery
	if l.counter != nil {
		l.depthEvery = depthEveryCounted
	}
	l.recov = recovererOf(c.Queue)
	l.c.deadDirty.Store(true) // read once, at the first empty receive
	// Unknown until Run reads them: a status page must not show an unread backlog as empty.
	l.c.depth.Store(-1)
	l.c.deadDepth.Store(-1)
	leases := c.HandlerSlots + c.Prefetch
	if c.Batch.on() {
		// A handler slot is one call, of up to MaxMessages messages.
		l.bh = c.Handler.(BatchHandler)
		leases = c.HandlerSlots*c.Batch.MaxMessages + c.Prefetch
	}
	l.budget = newLeaseBudget(leases, min(c.BatchSize, max(c.Prefetch, 1)))
	l.gate, _ = c.Limiter.(leaseGate)
	return l, nil
}

// Notify wakes an idle listener at once (a push notification: a message was sent). It never
// blocks; wake-ups that arrive while the listener is busy are merged.
func (l *Listener) Notify() {
	select {
	case l.notifyCh <- struct{}{}:
	default:
	}
	// After the token: a listener going dormant looks for the token after publishing its
	// spell, so one of the two sees the other.
	if d := l.dorm.Load(); d != nil && !d.quiet {
		d.fire(wakeNotify)
	}
	// A send went through: the queue serves, so a back-off after failed receives ends.
	if l.errStreak.Load() != 0 {
		l.recovery.Fire()
	}
}

// State returns a snapshot of the listener's counters. It is cheap and safe to call
// concurrently with Run.
func (l *Listener) State() State {
	q := l.hist.quantiles(0.5, 0.99)
	held := l.budget.held()
	counts, exact := queue.Counts{Leased: int64(held)}, false
	if c := l.c.counts.Load(); c != nil {
		counts, exact = *c, true
		// This listener's own leases are known without a queue call. A split read before
		// they were taken (up to depthEvery ago) would show none while its handlers run.
		// The leases it took since came out of Visible.
		if extra := int64(held) - counts.Leased; extra > 0 {
			counts.Leased += extra
			counts.Visible = max(counts.Visible-extra, 0)
		}
	} else if d := l.c.depth.Load(); d > 0 {
		// Only the total is known, leased messages included: this listener's own leases
		// are taken out of it, other hosts' stay in Visible.
		counts.Visible = max(d-int64(held), 0)
	}
	return State{
		Queue:           l.q.Name(),
		Depth:           l.c.depth.Load(),
		DeadLetterDepth: l.c.deadDepth.Load(),
		ActiveWorkers:   int(l.c.activeW.Load()),
		PeakWorkers:     int(l.c.peak.Load()),
		HelperWorkers:   l.c.helpers.Load(),
		MinWorkers:      l.cfg.MinWorkers,
		MaxWorkers:      l.cfg.MaxWorkers,
		InFlight:        int(l.c.inFlight.Load()),
		PushEnabled:     l.cfg.Push,
		Processed:       l.c.processed.Load(),
		Failed:          l.c.failed.Load(),
		Retried:         l.c.retried.Load(),
		Poisoned:        l.c.poisoned.Load(),
		Receives:        l.c.receives.Load(),
		EmptyReceives:   l.c.emptyReceives.Load(),
		Deletes:         l.c.deletes.Load(),
		Updates:         l.c.updates.Load(),
		Sends:           l.c.sends.Load(),
		Errors:          l.c.errorCalls.Load(),
		DepthQueries:    l.c.depthQueries.Load(),
		LeasesLost:      l.c.leasesLost.Load(),
		Released:        l.c.released.Load(),
		LeasedIdle:      int(max(l.c.leasedIdle.Load(), 0)),
		PeakLeasedIdle:  int(l.c.peakLeasedIdle.Load()),
		Leased:          held,
		Counts:          counts,
		CountsExact:     exact,
		LatencyP50:      q[0],
		LatencyP99:      q[1],
	}
}

// Run drains the queue until ctx ends. Then it stops receiving, lets in-flight handlers
// finish within ShutdownGrace, releases leased-but-unstarted messages at once and returns
// nil; it returns an error if handlers were still running when the grace period ended
// (their messages stay leased and are redelivered when the lease expires).
func (l *Listener) Run(ctx context.Context) error {
	return l.Start(ctx)()
}

// Start is Run without the wait: it starts the listener and returns at once; wait blocks
// until the listener stopped and returns what Run would. An idle push listener whose queue
// can call back on a write (FuncWatcher), or has no wake-up of its own, then holds no
// goroutine at all, so that a host of many idle bindings costs none per binding.
func (l *Listener) Start(ctx context.Context) (wait func() error) {
	if !l.running.CompareAndSwap(false, true) {
		err := fmt.Errorf("listener for queue %q: Run called twice", l.q.Name())
		return func() error { return err }
	}
	// Handlers and settlement outlive ctx by the grace period.
	l.hctx, l.hcancel = context.WithCancel(context.WithoutCancel(ctx))
	l.unstop = context.AfterFunc(ctx, func() { l.stopping.Store(true) })
	go l.run(ctx)
	return func() error {
		<-l.done
		return l.err
	}
}

// Done returns a channel closed once a started listener has stopped (Run or Start's wait
// then returns at once).
func (l *Listener) Done() <-chan struct{} { return l.done }

func (l *Listener) run(ctx context.Context) {
	// The depths status pages show are the listener's own: read them once at start (two
	// counted calls), so that a backlog present at start-up is not shown as empty.
	l.refreshIdleDepths(ctx, true)
	l.refreshDepth(ctx)

	l.mu.Lock()
	// Start as if idle: the first receive that finds work asks the scaler, so a backlog
	// present at start-up is met with the right number of workers.
	for range max(l.cfg.MinWorkers, 1) {
		l.startLocked(ctx, true, false)
	}
	l.mu.Unlock()

	l.supervise(ctx)
}

// end records how the listener stopped and releases Run.
func (l *Listener) end(err error) {
	if n := l.c.released.Load(); n > 0 {
		l.log.Info("released leased messages whose handler had not started", "released", n,
			"dequeue_counts_kept", l.releaser != nil)
	}
	l.unstop()
	l.hcancel()
	l.err = err
	close(l.done)
}

func (l *Listener) shutdown() error {
	l.stopping.Store(true)
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(l.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	}
	inFlight := l.c.inFlight.Load()
	l.hcancel()
	<-done
	if inFlight == 0 {
		return nil
	}
	return fmt.Errorf("listener for queue %q: %d handlers still running after the %s shutdown grace were cancelled",
		l.q.Name(), inFlight, l.cfg.ShutdownGrace)
}

// supervise restarts workers when one hands back its slot (time slice) and, with push or an
// IdlePacer, waits once the last worker stopped: dormant with no goroutine when it can
// (doze), otherwise in this goroutine (waitForWork), an idle listener's one goroutine. It
// shuts the listener down once ctx ends.
func (l *Listener) supervise(ctx context.Context) {
	for {
		if ctx.Err() != nil {
			// Before the select, which may pick a slot handed back instead.
			l.end(l.shutdown())
			return
		}
		select {
		case <-ctx.Done():
			l.end(l.shutdown())
			return
		case <-l.rescaleCh:
			l.scaleUp(ctx, 1)
		case <-l.emptyCh:
			if l.canDoze {
				if l.doze(ctx) {
					return // dormant: the wake-up supervises again
				}
				continue // a worker runs, or ctx ended
			}
			ok, woken := l.waitForWork(ctx)
			if !ok {
				continue // ctx ended
			}
			l.mu.Lock()
			if l.active == 0 {
				l.startLocked(ctx, true, woken)
			}
			l.mu.Unlock()
		}
	}
}

// startLocked starts one worker; asIfIdle means it starts as if the queue had been empty,
// so that finding work makes it ask the scaler, and woken that a wake-up started it. l.mu
// must be held.
func (l *Listener) startLocked(ctx context.Context, asIfIdle, woken bool) {
	if l.active >= l.cfg.MaxWorkers || ctx.Err() != nil {
		return
	}
	l.active++
	l.c.activeW.Store(int64(l.active))
	if int64(l.active) > l.c.peak.Load() {
		l.c.peak.Store(int64(l.active))
	}
	l.wg.Add(1)
	go l.worker(ctx, asIfIdle, woken)
}

// exitLocked gives back a worker's slot. l.mu must be held.
func (l *Listener) exitLocked() {
	l.active--
	l.c.activeW.Store(int64(l.active))
	if l.active == 0 && (l.cfg.Push || l.cfg.IdlePacer != nil) {
		select {
		case l.emptyCh <- struct{}{}:
		default:
		}
	}
}

// desired asks the scaler for the worker count, refreshing the depth if it is stale, and
// clamps the answer to MinWorkers..MaxWorkers and at least floor.
func (l *Listener) desired(ctx context.Context, floor int) int {
	l.scaledAt.Store(time.Now().UnixNano())
	l.refreshDepth(ctx)
	st := l.State()
	st.Depth = max(st.Depth, 0) // not read yet (a failed first read): the scaler sees none
	want := l.cfg.Scaler.Desired(ctx, st)
	return min(max(want, l.cfg.MinWorkers, floor), l.cfg.MaxWorkers)
}

// scaleUp brings the running workers up to the scaler's answer: parked workers first,
// then new ones.
func (l *Listener) scaleUp(ctx context.Context, floor int) {
	want := l.desired(ctx, floor)
	l.mu.Lock()
	defer l.mu.Unlock()
	need := want - (l.active - l.parked)
	for ; need > 0 && l.parked > 0; need-- {
		l.parked--
		l.unparkCh <- struct{}{} // capacity MaxWorkers >= parked: never blocks
	}
	for ; need > 0 && l.active < l.cfg.MaxWorkers; need-- {
		l.startLocked(ctx, false, false)
	}
}

// scaleStale reports whether the scaler was last asked more than depthEvery ago, for a
// worker under a backlog that may ask it again. Not while every slot is taken: nothing to
// add.
func (l *Listener) scaleStale(now time.Time) bool {
	if int(l.c.activeW.Load()) >= l.cfg.MaxWorkers {
		return false
	}
	return now.UnixNano()-l.scaledAt.Load() >= int64(depthEvery)
}

// refreshIdleDepths keeps the depths that status pages show current without a queue call
// per page view: on an empty receive, a queue depth last seen non-zero is read again (so a
// drained queue shows 0), and the dead-letter depth once something was dead-lettered (or at
// start). Each is read at most once per depthEvery and counted in DepthQueries; an idle
// listener whose depths are known makes no such call.
//
// afterWork says this is the first empty receive after work: the depths are then read
// whatever their age, so that a drained queue shows its final depths (this is bounded by the
// receives that found work).
func (l *Listener) refreshIdleDepths(ctx context.Context, afterWork bool) {
	if l.c.depth.Load() != 0 {
		if afterWork {
			l.depthAt.Store(0)
		}
		l.refreshDepth(ctx)
	}
	if !l.c.deadDirty.Load() {
		return
	}
	now := time.Now().UnixNano()
	last := l.deadAt.Load()
	if !afterWork && last != 0 && now-last < int64(depthEvery) || !l.deadAt.CompareAndSwap(last, now) {
		return
	}
	l.c.deadDirty.Store(false)
	l.c.depthQueries.Add(1)
	d, err := l.cfg.DeadLetter.Depth(ctx)
	if err != nil {
		l.c.deadDirty.Store(true)
		if ctx.Err() == nil {
			l.c.errorCalls.Add(1)
			l.log.Warn("dead-letter queue depth", "dead_letter", l.cfg.DeadLetter.Name(), "err", err)
		}
		return
	}
	l.c.deadDepth.Store(d)
}

func (l *Listener) refreshDepth(ctx context.Context) {
	now := time.Now().UnixNano()
	last := l.depthAt.Load()
	if last != 0 && now-last < int64(l.depthEvery) {
		return
	}
	if !l.depthAt.CompareAndSwap(last, now) {
		return // another worker is refreshing it
	}
	l.c.depthQueries.Add(1)
	if l.counter != nil {
		// One call either way: the split costs no more than the total.
		c, err := l.counter.Counts(ctx)
		if err != nil {
			l.depthErr(ctx, err)
			return
		}
		l.c.counts.Store(&c)
		l.c.depth.Store(c.Visible + c.Leased + c.Delayed)
		return
	}
	d, err := l.q.Depth(ctx)
	if err != nil {
		l.depthErr(ctx, err)
		return
	}
	l.c.depth.Store(d)
}

func (l *Listener) depthErr(ctx context.Context, err error) {
	if ctx.Err() == nil {
		l.c.errorCalls.Add(1)
		l.log.Warn("queue depth", "err", err)
	}
}

var errUnstarted = errors.New("not started")
