package runtime

import (
	"context"
	"errors"
	goruntime "runtime"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// The host side of the fuel time limit (package fuel adds the guest side): the yield
// function the instrumented code calls when its fuel runs out, and the per-call limits it
// checks.

// fuelExport is the export naming an instrumented module's fuel global, which metering
// reads (meter.go).
const fuelExport = fuel.GlobalExport

var (
	// errTimeLimit ends a call whose time limit passed; the pool reports it as ErrTimeout.
	errTimeLimit = errors.New("time limit reached")
	// errCallerGone ends a call whose caller's context ended (shutdown grace, deadline).
	errCallerGone = errors.New("caller's context ended")
)

// yieldFn is the wqhost_yield host function: it traps the call when its time is up and
// otherwise returns the next fuel allowance. It is also where a guest that never blocks
// gives other goroutines their turn: the Go scheduler's preemption signal almost always
// lands in compiled guest code, where it cannot act, so a call that has run for
// schedSlice since its last turn yields the processor itself. Host functions make the same
// check when the work they are charged adds up (charge.go).
func yieldFn() hostFn {
	return hostFn{fuel.YieldImport, nil, []api.ValueType{tI32}, func(ctx context.Context, mod api.Module, s []uint64) {
		if st := stateOf(ctx); st != nil {
			if st.fuelG == nil && st.pool.v.fuel && mod != nil {
				// A start function yields before InstantiateModule returns the instance
				// whose fuel global newInstance would take: the caller (the instance being
				// started, its exports already built) has it, so the start is metered too.
				st.fuelG = mod.ExportedGlobal(fuelExport)
			}
			st.fuelRefilled()
			if err := st.reserveStack(); err != nil {
				panic(err)
			}
			st.checkpoint(ctx)
		} else {
			goruntime.Gosched()
		}
		s[0] = fuel.Refill
	}}
}

// schedSlice is how long a guest runs before yielding the processor: far below the Go
// scheduler's own 10 ms slice, so spinning guests cannot starve the host's goroutines (nor
// hold up a garbage collection's stop-the-world) for long.
const schedSlice = time.Millisecond

// arm sets the limits the next guest call runs under: the caller's context and the time
// limit d (0: none). It reads no clock: a call that ends before its first yield or wait,
// as most do, never needs one. The limit counts from the first yield or wait instead of
// the call's start, which is later by at most one fuel allowance of guest work.
func (st *callState) arm(caller context.Context, d time.Duration) {
	st.caller, st.limit, st.deadline, st.turn = caller, d, 0, 0
}

// disarm ends the call's limits and the wait context derived from them.
func (st *callState) disarm() {
	if st.wcancel != nil {
		st.endWait()
	}
	st.caller, st.limit, st.deadline = nil, 0, 0
}

// endWait releases the wait context a call made (waitCtx); most calls make none.
func (st *callState) endWait() {
	st.wcancel()
	st.wctx, st.wcancel = nil, nil
}

// clock starts the call's clock on first use and returns the time now (Engine.since).
func (st *callState) clock() time.Duration {
	now := st.pool.t.e.since()
	if st.turn == 0 {
		st.turn = now
		if st.limit > 0 {
			st.deadline = now + st.limit
		}
	}
	return now
}

// overdue reports why the call must end at now (Engine.since, from clock, which starts the
// call's clock), if it must.
func (st *callState) overdue(now time.Duration) error {
	if st.deadline != 0 && now >= st.deadline {
		return errTimeLimit
	}
	if st.caller != nil && st.caller.Err() != nil {
		return errCallerGone
	}
	return nil
}

// endIfOverdue ends the call (a trap, as the yield function's) when a host wait ended
// because the call's time limit passed or its caller left: the call fails as a timeout
// whatever the guest does next. Returning ERR_TIMEOUT alone left that to the guest's next
// fuel check, which a guest that returns at once, or has fuel left, never reaches.
func (st *callState) endIfOverdue() {
	if st.caller == nil {
		return
	}
	if err := st.overdue(st.clock()); err != nil {
		panic(err)
	}
}

// waitCtx is the context a host function that blocks (an outbound request) waits under: ctx
// itself unless the call is armed, else one that ends with the caller's context or at the
// call's time limit, made once per call. An armed instance's own context is not cancelled
// by a watchdog, so waiting under it alone would outlast the limit.
func (st *callState) waitCtx(ctx context.Context) context.Context {
	if st.caller == nil {
		return ctx
	}
	if st.wctx == nil {
		st.clock()
		if st.deadline != 0 {
			st.wctx, st.wcancel = context.WithDeadline(st.caller, st.pool.t.e.epoch.Add(st.deadline))
		} else {
			st.wctx, st.wcancel = context.WithCancel(st.caller)
		}
	}
	return st.wctx
}

// sleep is the instance's WASI nanosleep (poll_oneoff with a clock): it never sleeps past
// the call's time limit nor after the caller's context ends, and then ends the call there, so
// a guest asleep for an hour gives its slot back at its limit.
func (st *callState) sleep(ns int64) {
	d := time.Duration(ns)
	if now := st.clock(); st.deadline != 0 {
		d = min(d, st.deadline-now)
	}
	if d > 0 {
		t := time.NewTimer(d)
		var done <-chan struct{}
		if st.caller != nil {
			done = st.caller.Done()
		}
		select {
		case <-t.C:
		case <-done:
		}
		t.Stop()
	}
	if err := st.overdue(st.clock()); err != nil {
		panic(err)
	}
}
