package runtime

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// Metering (docs/metering.md): what each call cost, read from counters the time limit keeps
// anyway, so that metering adds no work per guest instruction nor per host call. The fuel
// global the instrumented code decrements (package fuel) is exported as fuelExport and read
// once before and once after the call; each refill by wqhost_yield adds what was spent
// before it; the host work charged to the call's account (charge.go) is summed at each
// checkpoint. The rest is two clock reads, the memory's size and the call's HTTPReport.

// Usage is what one handler call cost (docs/metering.md). In a batch call it is the whole
// call's: the host attributes it to the batch's messages (docs/metering.md, "Batches").
type Usage struct {
	// Fuel is the call's fuel units: the guest's (one per check plus one per 32 bytes of
	// code run, fuel.BulkCharge per bulk memory operation, memory.fill and memory.copy one more per
	// 16 bytes of their length) and the host work charged to it
	// (about a nanosecond of host work each), StartFuel included. 0 where the module runs
	// without a fuel counter (wasi-stdio, a module the instrumenter cannot read).
	Fuel uint64
	// StartFuel is the part of Fuel spent starting the instance the call had to create
	// because none was idle: its start function (_initialize, a Go runtime's start, an
	// Extism plugin's constructors) and the host work charged to it. 0 when an idle
	// instance took the call. A start that failed is charged the same, its call never ran.
	StartFuel uint64
	// StartWall is that start's wall time (part of Wait, not of Wall); 0 when an idle
	// instance took the call.
	StartWall time.Duration
	// Wall is the call's wall time, from entering the guest to its return.
	Wall time.Duration
	// MemoryBytes is the instance's linear memory after the call: its high-water mark,
	// since a WebAssembly memory never shrinks (the instance's, so it includes what
	// earlier calls of the same instance grew).
	MemoryBytes uint64
	// HostTime is the time the call spent waiting in host calls that wait: outbound
	// requests and their bodies (http_request, http_body_read). Other host calls are not
	// timed; their work is in Fuel.
	HostTime time.Duration
	// HTTPRequests and HTTPBytes are the call's outbound requests and their request plus
	// response body bytes.
	HTTPRequests int
	HTTPBytes    int64
	// Wait is the time before the guest ran: waiting for an instance slot and starting an
	// instance when none was idle (0 when one was). Not the message's cost, so not metered;
	// Wait + Wall is the call as its caller saw it.
	Wait time.Duration
}

// meterMark is what metering reads before a call.
type meterMark struct {
	fuel int64 // the fuel global plus the refills so far
	work int64 // host work charged so far
}

// startCost is what starting one instance cost: the fuel its start spent (callState.spent)
// and the wall time of its instantiation, start function included.
type startCost struct {
	fuel uint64
	wall time.Duration
}

// spent is the fuel st's instance has spent since it was instantiated, host work included:
// after its start, what the start cost. The instrumenter sets the fuel global to
// fuel.Refill, so the spending counter meterBegin reads (refilled - fuelLeft) starts at
// -fuel.Refill. Without a fuel global (none, or a start that failed before its first
// yield) only the banked refills and host work are known.
func (st *callState) spent() uint64 {
	d := st.refilled + st.workDone + int64(st.work)
	if st.fuelG != nil {
		d += fuel.Refill - st.fuelLeft()
	}
	return uint64(max(d, 0))
}

// chargeWarm tells PoolConfig.OnWarmStart what an instance started ahead of demand cost.
func (p *Pool) chargeWarm(c startCost) {
	if p.cfg.OnWarmStart != nil && (c.fuel > 0 || c.wall > 0) {
		p.cfg.OnWarmStart(Usage{Fuel: c.fuel, StartFuel: c.fuel, StartWall: c.wall})
	}
}

// checkoutMetered takes a call slot and an instance for it, instantiating one when none is
// idle (checkoutSlow), and starts the call's clock (callState.start), setting u's Wait and,
// for an instance it started, the start's cost (Fuel = StartFuel, StartWall), also when
// the start failed: one clock read when an instance is idle, whose checkout takes
// nanoseconds, and one more after a wait or an instantiation, so the guest's wall time
// never includes them. The common case, the instance the last call parked, is the fast
// path.
func (p *Pool) checkoutMetered(ctx context.Context, who callee, u *Usage) (*instance, error) {
	t0 := p.t.e.since()
	if p.trace == nil && !p.closed.Load() {
		if inst := p.slots.unpark(); inst != nil {
			inst.st.start = t0
			return inst, nil
		}
	}
	inst, cost, err := p.checkoutSlow(ctx, who)
	t1 := p.t.e.since()
	u.Wait = t1 - t0
	u.Fuel, u.StartFuel, u.StartWall = cost.fuel, cost.fuel, cost.wall
	if err == nil {
		inst.st.start = t1
	}
	return inst, err
}

// fuelLeft is the instance's fuel global; 0 without one.
func (st *callState) fuelLeft() int64 {
	if st.fuelG == nil {
		return 0
	}
	return int64(int32(uint32(st.fuelG.Get())))
}

// fuelRefilled is wqhost_yield's part of metering: the guest is about to get a new
// allowance, so what was spent since the last refill is banked. The guest calls yield only
// when its fuel is below zero, so that is the whole allowance and the overdraft, which the
// global holds in a function keeping its fuel there. One keeping it in a local (a loop that
// calls nothing, package fuel) leaves the global as it was at its entry, above zero: the
// overdraft, less than one check's charge, is not counted, and the allowance is. Banking
// what the global held instead metered such a loop nothing however long it ran.
func (st *callState) fuelRefilled() {
	if st.fuelG != nil {
		st.refilled += fuel.Refill - min(st.fuelLeft(), 0)
	}
}

// meterBegin marks the start of a call on inst (checkoutMetered started its clock).
func (p *Pool) meterBegin(st *callState) meterMark {
	return meterMark{fuel: st.refilled - st.fuelLeft(), work: st.workDone + int64(st.work)}
}

// meterEnd writes into u the usage of the call begun at m, whose outbound requests were
// http, keeping what checkoutMetered set (Wait, the start's cost, added to Fuel).
func (p *Pool) meterEnd(st *callState, mod api.Module, m meterMark, http HTTPReport, u *Usage) {
	u.Wall = p.t.e.since() - st.start
	u.HostTime, u.HTTPRequests, u.HTTPBytes = http.Wait, http.Requests, http.BytesOut+http.BytesIn
	u.Fuel = u.StartFuel
	if d := st.refilled - st.fuelLeft() - m.fuel + st.workDone + int64(st.work) - m.work; d > 0 {
		u.Fuel += uint64(d)
	}
	u.MemoryBytes = 0
	if mem := mod.Memory(); mem != nil {
		u.MemoryBytes = uint64(mem.Size())
	}
}
