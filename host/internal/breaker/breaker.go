// Package breaker is a binding's circuit breaker and the gate its handler calls pass: the
// breaker decides how many messages the binding may lease (listener.Limiter's LeaseRoom), and the
// Gate (listener.Limiter) holds one of the host's suspect slots for each call while the
// breaker is not closed, then the tenant's share of the fair scheduler if any.
//
// One lock per breaker (breaker.mu); a Gate takes it, then releases it, before it waits on
// the suspect slots or the tenant's share, so it is never held with another lock.
package breaker

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
)

// A binding's circuit breaker. A binding whose calls keep running to their time limit (or
// breaking their memory limit, or trapping after long work) would otherwise keep every
// instance of its pool spinning: its neighbours, in its tenant or another, lose CPU whatever
// their slot share.
//
// Only expensive failures count (Options.counts): a time-limit kill, a memory-limit kill, or
// a trap after at least Options.CheapFailure. A trap that comes at once (a bad pointer, a
// panic on bad input, unreachable) costs no more than a successful call, and counting it
// made a handler that always traps poison its backlog at one probe per cool-down (about one
// delivery every 4 minutes, days for 1000 messages); such failures now go the poison
// policy's way, retried and dead-lettered after max_dequeue_count deliveries in seconds.
// Unknown statuses and wasi-stdio exit codes never counted (the call returned).
//
// A cheap failure is cheap only if the instance start it forces is: a trap discards its
// instance, and the next call starts a fresh one, running its start function again (a Go
// runtime's start, a long _initialize). So the starts that failed calls of a binding had to
// make (Gate.RecordCall's start) add up while it fails in a row, and each Options.CheapFailure
// of them counts as one failure: an instance restarted by cheap traps every few hundred
// milliseconds opens the breaker as a spinning one does. A success forgets them.
//
//   - closed: the binding runs as configured. Options.Threshold (3) counted failures in a
//     row (no success in between) open it.
//   - open: the binding leases no message for a cool-down (its messages stay in the queue,
//     their dequeue counts untouched). The first cool-down is the tenant's time limit; each
//     failed probe doubles it, up to MaxCooldown time limits (Options.Cooldown and
//     MaxCooldown set them), so a binding that only spins spends at most about half its
//     time spinning at first and a ninth at worst.
//   - half-open: after the cool-down the binding leases one message at a time (a probe). A
//     probe that runs without a trap or timeout closes the breaker; one that fails opens it
//     again.
//
// Every call of a binding whose breaker is not closed also holds one of the host's suspect
// slots (GOMAXPROCS/2, at least 1), and a slot whose call failed rests as long as that call
// ran before the next suspect call takes it: however many bindings spin, they keep at most
// a quarter of the cores, and healthy bindings the rest. Only suspect calls are bounded: a default host-wide
// budget on every call, measured with BenchmarkSpinning on 2 cores, did no better at
// 4 × GOMAXPROCS and worse at 2 × (0.30 against 0.59–0.82 without): probes and the calls
// leased before a breaker opened hold budget slots the healthy binding then waits for.
//
// Messages leased before the breaker opened still run, one suspect slot at a time: they are
// attempted, never sent back unstarted, so no dequeue count is burned without an attempt.
// A spinning message thus reaches the poison queue after max_dequeue_count attempts, each
// at most a time limit plus the cool-down (or the slot's rest) and the poison policy's
// retry delay.
const (
	// DefaultThreshold is Options.Threshold's default: counted failures in a row that open
	// the breaker.
	DefaultThreshold = 3
	// MaxCooldown is Options.MaxCooldown's default, in cool-downs (the tenant's time limit
	// unless Options.Cooldown says otherwise).
	MaxCooldown = 8
	// CheapFailureDivisor gives Options.CheapFailure's default: the time limit / 10.
	CheapFailureDivisor = 10
)

// Options configure a binding's breaker (the config's breaker: block). Zero values mean the
// defaults.
type Options struct {
	// Timeout is the tenant's time limit per call (limits.timeout).
	Timeout time.Duration
	// Threshold is how many counted failures in a row open the breaker; default
	// DefaultThreshold, negative: never (the breaker stays closed).
	Threshold int
	// Cooldown is the first cool-down; default Timeout.
	Cooldown time.Duration
	// MaxCooldown caps the doubling cool-down; default MaxCooldown × Cooldown.
	MaxCooldown time.Duration
	// CheapFailure: a trap that ends a call within it of its start is cheap and not counted;
	// default Timeout / CheapFailureDivisor, negative: every trap counts (the old rule).
	CheapFailure time.Duration
}

// withDefaults fills in o's zero values.
func (o Options) withDefaults() Options {
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if o.Cooldown <= 0 {
		o.Cooldown = o.Timeout
	}
	o.Cooldown = max(o.Cooldown, 10*time.Millisecond)
	if o.MaxCooldown <= 0 {
		o.MaxCooldown = MaxCooldown * o.Cooldown
	}
	o.MaxCooldown = max(o.MaxCooldown, o.Cooldown)
	if o.CheapFailure == 0 {
		o.CheapFailure = o.Timeout / CheapFailureDivisor
	}
	return o
}

// counts reports whether a handler call that failed because of c after d counts toward
// opening the breaker: the guest misbehaved expensively, as opposed to failing at once,
// returning a status, or the host shutting down or a reload closing its pool.
func (o Options) counts(c outcome.Cause, d time.Duration) bool {
	switch c {
	case outcome.CauseTimeout, outcome.CauseMemoryLimit:
		return true
	case outcome.CauseTrap:
		return o.CheapFailure < 0 || d >= o.CheapFailure
	}
	return false
}

// breakerState is a circuit breaker's state.
type breakerState int32

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen
)

func (s breakerState) String() string {
	switch s {
	case breakerOpen:
		return "open"
	case breakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// breaker is one binding's circuit breaker; its time is passed in, so its rules are tested
// without a clock.
type breaker struct {
	base, max time.Duration // first and longest cool-down
	threshold int           // counted failures in a row that open it; < 0: never
	cheap     time.Duration // Options.CheapFailure: the start time that counts as a failure

	mu       sync.Mutex
	state    breakerState
	fails    int           // failed calls in a row, while closed
	starts   time.Duration // start time forced by failures in a row not yet counted
	cooldown time.Duration // the current (last) cool-down
	until    time.Time     // end of the cool-down, while open
	wake     chan struct{} // closed when leasing may resume; replaced after

	trips atomic.Uint64 // times opened
	st    atomic.Int32  // state, for status without the lock
}

func newBreaker(o Options) *breaker {
	o = o.withDefaults()
	return &breaker{base: o.Cooldown, max: o.MaxCooldown, threshold: o.Threshold, cheap: o.CheapFailure, wake: make(chan struct{})}
}

// room implements the lease rule (listener.Limiter's LeaseRoom) at now, with held messages leased.
func (b *breaker) room(now time.Time, held int) (room int, wake <-chan struct{}, recheck time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == breakerOpen && !now.Before(b.until) {
		b.setLocked(breakerHalfOpen)
	}
	switch b.state {
	case breakerOpen:
		return 0, b.wake, b.until.Sub(now)
	case breakerHalfOpen:
		if held >= 1 {
			return 0, b.wake, 0 // the probe (or an earlier lease) is still out
		}
		return 1, nil, 0
	}
	return -1, nil, 0
}

// record notes the outcome of one call at now: failed means it counts (Options.counts).
func (b *breaker) record(now time.Time, failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !failed {
		b.fails, b.cooldown, b.starts = 0, 0, 0
		if b.state != breakerClosed {
			b.setLocked(breakerClosed)
		}
		return
	}
	b.failLocked(now)
}

// recordStart notes at now a failure that does not count by itself but had to start its
// instance, for start: once the starts of failures in a row add up to the cheap-failure
// bound, they count as one failure.
func (b *breaker) recordStart(now time.Time, start time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cheap <= 0 || start <= 0 {
		return // every trap counts already (or there was no start)
	}
	if b.starts += start; b.starts >= b.cheap {
		b.starts = 0
		b.failLocked(now)
	}
}

// failLocked counts one failure at now.
func (b *breaker) failLocked(now time.Time) {
	switch b.state {
	case breakerClosed:
		if b.fails++; b.threshold > 0 && b.fails >= b.threshold {
			b.tripLocked(now)
		}
	case breakerHalfOpen:
		b.tripLocked(now)
	case breakerOpen:
		// A call leased before the breaker opened: the cool-down already runs.
	}
}

// reset closes the breaker and forgets its cool-down: a new module version swapped in.
func (b *breaker) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fails, b.cooldown, b.starts = 0, 0, 0
	if b.state != breakerClosed {
		b.setLocked(breakerClosed)
	}
}

func (b *breaker) tripLocked(now time.Time) {
	if b.cooldown == 0 {
		b.cooldown = b.base
	} else {
		b.cooldown = min(2*b.cooldown, b.max)
	}
	b.until = now.Add(b.cooldown)
	b.fails, b.starts = 0, 0
	b.trips.Add(1)
	b.setLocked(breakerOpen)
}

// setLocked changes the state and wakes the listener's workers waiting to lease.
func (b *breaker) setLocked(s breakerState) {
	b.state = s
	b.st.Store(int32(s))
	close(b.wake)
	b.wake = make(chan struct{})
}

// state returns the state in force (an open breaker whose cool-down has passed shows as
// open until the listener asks to lease).
func (b *breaker) stateNow() breakerState { return breakerState(b.st.Load()) }

func (b *breaker) status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Status{State: b.state.String(), Trips: b.trips.Load(), Cooldown: b.cooldown}
}

// NewSuspectSlots returns the host's suspect slots, shared by the gates of all its
// bindings: as many calls of bindings whose breaker is not closed may run at once
// host-wide as half the cores Go uses, at least one.
func NewSuspectSlots() chan struct{} { return make(chan struct{}, max(runtime.GOMAXPROCS(0)/2, 1)) }

// Gate is the listener.Limiter of one binding: its circuit breaker (which gates
// leasing), the host's suspect slots for its calls while the breaker is not closed, and
// the tenant's share of the fair scheduler (nil when the tenant has none).
type Gate struct {
	br      *breaker
	opts    Options          // with defaults: which failures count
	tenant  listener.Limiter // may be nil
	suspect chan struct{}    // the host's suspect slots
	holding atomic.Int64     // suspect slots held by this binding's calls
	rest    atomic.Int64     // how long the next suspect slot released rests (ns): the failed call's duration
	running atomic.Int64     // calls holding a slot of this gate, for status
}

// NewGateWith returns the gate of a binding: its own breaker on o, the host's suspect slots
// (NewSuspectSlots), and tenant, the tenant's share of the fair scheduler, or nil when it
// has none.
func NewGateWith(o Options, suspect chan struct{}, tenant listener.Limiter) *Gate {
	o = o.withDefaults()
	return &Gate{br: newBreaker(o), opts: o, suspect: suspect, tenant: tenant}
}

// Status is a gate's state, for status and metrics.
type Status struct {
	State    string        // closed, open or half-open
	Trips    uint64        // times the breaker opened
	Cooldown time.Duration // the current (last) cool-down
	Running  int64         // calls holding a slot of the gate
}

// Status returns the gate's state now.
func (g *Gate) Status() Status {
	st := g.br.status()
	st.Running = g.running.Load()
	return st
}

// Reset closes the breaker and forgets its cool-down: a new module version swapped in is
// judged on its own calls.
func (g *Gate) Reset() { g.br.reset() }

// Acquire implements listener.Limiter.
func (g *Gate) Acquire(ctx context.Context) error {
	if g.br.stateNow() != breakerClosed {
		select {
		case g.suspect <- struct{}{}:
			g.holding.Add(1)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if g.tenant != nil {
		if err := g.tenant.Acquire(ctx); err != nil {
			g.releaseSuspect()
			return err
		}
	}
	g.running.Add(1)
	return nil
}

// Release implements listener.Limiter.
func (g *Gate) Release() {
	g.running.Add(-1)
	if g.tenant != nil {
		g.tenant.Release()
	}
	g.releaseSuspect()
}

// releaseSuspect hands back a suspect slot if this binding's calls hold one: the slots are
// interchangeable, so counting them is enough.
func (g *Gate) releaseSuspect() {
	for {
		n := g.holding.Load()
		if n == 0 {
			return
		}
		if g.holding.CompareAndSwap(n, n-1) {
			if rest := time.Duration(g.rest.Swap(0)); rest > 0 {
				// The slot rests as long as the failed call ran: a suspect slot spins at
				// most half the time.
				time.AfterFunc(rest, func() { <-g.suspect })
				return
			}
			<-g.suspect
			return
		}
	}
}

// LeaseRoom gates the binding's leasing (see listener.Limiter).
func (g *Gate) LeaseRoom(held int) (int, <-chan struct{}, time.Duration) {
	return g.br.room(time.Now(), held)
}

// Record notes the outcome of a handler call that ran for d, for the breaker: c is why it
// failed, CauseNone if it did not.
func (g *Gate) Record(c outcome.Cause, d time.Duration) { g.RecordCall(c, d, 0) }

// RecordCall notes the outcome of a handler call that ran for d (its wait for an instance
// included) and had to start its instance for start (0: an idle one took it), for the
// breaker: a failure that does not count by itself adds its start to the starts of failures
// in a row, which count once they reach Options.CheapFailure. c is why the call failed,
// CauseNone if it did not.
func (g *Gate) RecordCall(c outcome.Cause, d, start time.Duration) {
	switch {
	case c == outcome.CauseNone:
		g.br.record(time.Now(), false)
	case g.opts.counts(c, d):
		g.br.record(time.Now(), true)
		if g.holding.Load() > 0 {
			g.rest.Store(int64(d))
		}
	case start > 0:
		g.br.recordStart(time.Now(), start)
	}
}

var (
	_ listener.Limiter = (*Gate)(nil)
	// The listener gates leasing on a Limiter with this method (listener.Limiter).
	_ interface {
		LeaseRoom(held int) (int, <-chan struct{}, time.Duration)
	} = (*Gate)(nil)
)
