package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// The path of a call, single or batch (batch.go): an instance checked out of the pool, the
// guest called under the call's limits, the failure classified, the instance checked in.

// Call hands in to the module and returns its verdict. An error means the call failed (trap,
// time limit, memory limit, bad pointer, unknown status, or ctx ended: the error then wraps
// ctx's cause); the instance is then replaced. Ending ctx interrupts a running guest when
// the pool has a time limit (PoolConfig.Timeout > 0, which the host always sets).
//
// The call is a batch of one (docs/abi.md): a verdict the handler sets with
// batch_verdict(0, ...) replaces the status it returns and, being final, stands if the call
// fails after it (the failure is logged and the instance replaced); outputs are kept only
// when the resulting status is ok.
func (p *Pool) Call(ctx context.Context, in *Input) (*Result, error) {
	out := new(Result)
	if err := p.CallInto(ctx, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// CallInto is Call writing the result into out, which it clears first: a caller that keeps
// its Input and Result for the next message makes a wqhost/v1 call that allocates nothing
// unless the guest emits or logs. The error it returns is out.Err. out's verdict is valid
// only when the error is nil, and its Outputs until out is reused; but out.Usage, what the
// call cost, is set either way (zero when the guest never ran), so a failed attempt is
// metered too.
func (p *Pool) CallInto(ctx context.Context, in *Input, out *Result) error {
	out.Err = p.callInto(ctx, in, out)
	return out.Err
}

func (p *Pool) callInto(ctx context.Context, in *Input, out *Result) error {
	if p.stdio {
		start := p.t.e.since()
		o, err := p.callStdio(ctx, in)
		if err == nil {
			*out = *o
		}
		// A fresh instance per call and no fuel counter: its wall time is its cost.
		out.Usage = Usage{Wall: p.t.e.since() - start}
		return err
	}
	out.Usage = Usage{}
	out.Release()
	if p.ext != "" {
		return p.callExtism(ctx, in, out)
	}
	inst, err := p.checkoutMetered(ctx, callee{id: in.ID}, &out.Usage)
	if err != nil {
		return err
	}
	discard, err := p.run(ctx, inst, in, out)
	p.checkin(inst, discard)
	return err
}

// callee names what a call handles, in errors and logs: one message, or a batch of n led by
// message id.
type callee struct {
	id string
	n  int // the batch's size; 0: a single call
}

func (c callee) String() string {
	if c.n == 0 {
		return "message " + c.id
	}
	return fmt.Sprintf("batch of %d messages from %s", c.n, c.id)
}

// logAttrs are a log line's attributes: the call's message id (a batch's first) and a
// batch's size, then more.
func (c callee) logAttrs(more ...any) []any {
	attrs := make([]any, 0, 4+len(more))
	attrs = append(attrs, "message_id", c.id)
	if c.n > 0 {
		attrs = append(attrs, "batch_size", c.n)
	}
	return append(attrs, more...)
}

// checkoutSlow waits for a slot and takes its idle instance, or starts one: then cost is
// what its start cost (set when the start failed too).
func (p *Pool) checkoutSlow(ctx context.Context, who callee) (inst *instance, cost startCost, err error) {
	inst, err = p.slots.acquire(ctx)
	if err != nil {
		return nil, cost, fmt.Errorf("runtime: %s: waiting for an instance: %w", who, err)
	}
	if p.closed.Load() {
		p.slots.unacquire(inst)
		return nil, cost, fmt.Errorf("runtime: %s: %w", who, ErrPoolClosed)
	}
	if inst == nil {
		if inst, cost, err = p.newInstance(ctx); err != nil {
			p.slots.unacquire(nil)
			return nil, cost, err
		}
	}
	if p.trace != nil {
		p.trace(inst, true)
	}
	return inst, cost, nil
}

// checkin gives inst's slot back, and inst with it unless it must be replaced. The common
// case, parking inst for the next call, is the inlined fast path.
func (p *Pool) checkin(inst *instance, discard bool) {
	if !discard && p.trace == nil && !p.closed.Load() && p.slots.park(inst) {
		return
	}
	p.checkinSlow(inst, discard)
}

func (p *Pool) checkinSlow(inst *instance, discard bool) {
	if p.trace != nil {
		p.trace(inst, false)
	}
	if discard || p.closed.Load() {
		// The instance is closed before its slot goes back, so a Close waiting for the slot
		// returns with every instance closed.
		p.discard(inst)
		p.slots.release(nil)
	} else if !p.slots.release(inst) {
		// A refill raced this call's fresh instance; keep the pool within MaxInstances.
		inst.close(context.Background())
		p.total.Add(-1)
	}
}

// run hands in to inst's wqhost_handle and writes the message's verdict into out.
func (p *Pool) run(ctx context.Context, inst *instance, in *Input, out *Result) (bool, error) {
	// Every field set, rather than out cleared as a whole: a reused out keeps first's
	// backing, and a call that emitted nothing leaves it as it was.
	out.Verdict, out.RetryAfter, out.ErrorText, out.HTTP = 0, 0, "", HTTPReport{}
	if out.first[0].Body != nil {
		out.first[0] = Emitted{} // the last call's output, not to be kept alive by out
	}
	out.Outputs = out.first[:0]
	st := inst.st
	st.beginSingle(in, out)
	rc, discard, err := p.invoke(ctx, inst, inst.handle, callee{id: in.ID})
	hasVerdict := st.oneSet[0]
	if hasVerdict {
		v := &st.oneRes[0]
		out.Verdict, out.RetryAfter, out.ErrorText = v.Verdict, v.RetryAfter, v.ErrorText
	}
	out.held = st.takeHeld()
	st.end()
	switch {
	case hasVerdict:
		if err != nil {
			p.logger.Warn("handler failed after setting its message's verdict; the verdict stands",
				"message_id", in.ID, "status", out.Verdict, "err", err)
		}
	case err != nil:
		out.Release()
		return discard, err
	case rc < 0 || rc > 2:
		out.Release()
		return discard, badStatus("message "+in.ID, rc, out.ErrorText)
	default:
		out.Verdict = Verdict(rc)
	}
	if out.Verdict != VerdictOK {
		out.Outputs = nil
		out.Release()
	}
	return discard, nil
}

// invoke calls fn, a handle export of inst, for the call inst.st was set up for (beginSingle,
// beginBatch). It is the one path of every call: the time limit and the caller's context,
// the guest's log and outbound requests, and whether the instance must be replaced. err is
// why the call failed, naming who; when it is nil, rc is the status the guest returned.
func (p *Pool) invoke(ctx context.Context, inst *instance, fn api.Function, who callee) (rc int32, discard bool, err error) {
	st := inst.st
	st.logs, st.logBytes, st.dropped, st.callBytes = 0, 0, 0, 0
	inst.stdio.reset(who)
	inst.mem.forgetRefusal()
	mark := p.meterBegin(st)
	inst.growRefused.Store(0)
	// The caller's context bounds the call too (a shutdown grace, a caller's deadline):
	// ending it interrupts the guest like the time limit does. With fuel the guest's next
	// yield sees it; otherwise the instance's context is cancelled, and the instance, its
	// context spent, is replaced.
	var stop func() bool
	if p.v.fuel {
		st.arm(ctx, p.cfg.Timeout)
	} else {
		stop = context.AfterFunc(ctx, inst.cancel)
	}
	if inst.timer != nil {
		inst.timer.Reset(p.cfg.Timeout)
	}
	st.running = fn
	err = fn.CallWithStack(inst.ctx, inst.stack[:])
	st.running = nil
	abandoned := err != nil && errors.Is(err, errCallerGone)
	if p.v.fuel {
		st.disarm()
	} else if !stop() {
		abandoned = true
	}
	if st.dropped > 0 {
		p.logDropped(who, st.dropped)
	}
	timedOut := inst.timer != nil && !inst.timer.Stop()
	var http HTTPReport
	if st.http.used() {
		http = st.closeHTTP()
		st.out.HTTP = http
		p.http.add(http)
	}
	if st.out != nil {
		p.meterEnd(st, inst.mod, mark, http, &st.out.Usage)
	}
	inst.uses++
	if err == nil && !abandoned {
		// With timedOut, the watchdog fired after the guest returned: the result stands, the
		// instance's context is spent.
		discard = inst.timer != nil && inst.ctx.Err() != nil ||
			p.cfg.MaxUses > 0 && inst.uses >= p.cfg.MaxUses ||
			p.cfg.MaxMemoryBytes > 0 && uint64(inst.mod.Memory().Size()) > p.cfg.MaxMemoryBytes
		return int32(inst.stack[0]), discard, nil
	}
	return 0, true, p.failure(ctx, inst, who, err, abandoned, timedOut)
}

// logDropped says how many of a call's guest log lines were left out: never silently.
func (p *Pool) logDropped(who callee, dropped int) {
	p.logger.Warn("guest log lines dropped", who.logAttrs("dropped", dropped,
		"limit_lines", maxLogsPerCall, "limit_bytes", maxLogBytesPerCall, "source", "guest")...)
}

// failure says why a call failed, naming who, and counts it. Out of invoke, whose every call
// would otherwise pay for the larger frame the error paths need.
func (p *Pool) failure(ctx context.Context, inst *instance, who callee, err error, abandoned, timedOut bool) error {
	refusal := inst.mem.takeRefusal()
	if refusal == nil && errors.As(err, &refusal) {
		// An emit the budget refused (callState.emit): the refusal is the whole story.
		err = refusal
	}
	switch {
	case abandoned:
		// Not the guest's fault: the caller's reason.
		return fmt.Errorf("runtime: %s: call abandoned: %w", who, context.Cause(ctx))
	case timedOut || errors.Is(err, errTimeLimit):
		p.timeouts.Add(1)
		return fmt.Errorf("runtime: %s: %w (%s): %w", who, ErrTimeout, p.cfg.Timeout, err)
	case isHostCallError(err):
		p.traps.Add(1)
		return fmt.Errorf("runtime: %s: %w: %w", who, ErrTrap, err)
	case refusal != nil:
		// The tenant's memory budget refused a memory.grow the guest then could not do
		// without: not the guest's limit, the host's room; another try may find it.
		p.traps.Add(1)
		if err == error(refusal) {
			return fmt.Errorf("runtime: %s: %w", who, refusal)
		}
		return fmt.Errorf("runtime: %s: %w: %w", who, refusal, err)
	case isStackOverflow(err):
		// Before the memory check: a guest near its memory limit that recursed for ever
		// overflowed its stack, it did not run out of memory.
		p.traps.Add(1)
		return fmt.Errorf("runtime: %s: %w: %w", who, ErrStackOverflow, err)
	case inst.growRefused.Load() > 0:
		// Only a memory.grow the limit refused in this call: an instance at its limit that
		// traps for another reason (unreachable, a bad access) trapped, whatever its size.
		p.traps.Add(1)
		return fmt.Errorf("runtime: %s: %w (%d bytes): %w", who, ErrMemoryLimit, p.memLimit, err)
	default:
		p.traps.Add(1)
		return fmt.Errorf("runtime: %s: %w: %w", who, ErrTrap, err)
	}
}

// isHostCallError reports a guest's misuse of a host function. Its own function: the target
// errors.As needs lives on the heap, which in invoke would cost every call an allocation.
func isHostCallError(err error) bool {
	var hce *HostCallError
	return errors.As(err, &hce)
}

// isStackOverflow reports wazero's stack-overflow trap. wazero's sentinel for it is internal,
// so its text is matched: an error in the chain reading "stack overflow" (or "wasm error:
// stack overflow" with a stack trace).
func isStackOverflow(err error) bool {
	for err != nil {
		if s := err.Error(); s == "stack overflow" || strings.HasPrefix(s, "wasm error: stack overflow") {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}
