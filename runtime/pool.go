package runtime

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Errors a call can fail with; test them with errors.Is.
var (
	ErrTimeout     = errors.New("handler exceeded its time limit")
	ErrMemoryLimit = errors.New("handler exceeded its memory limit")
	// ErrStackOverflow: the guest's calls nested deeper than the runtime's call stack allows
	// (endless recursion).
	ErrStackOverflow = errors.New("handler overflowed its call stack")
	ErrTrap          = errors.New("handler trapped")
	ErrBadStatus     = errors.New("handler returned an unknown status")
	ErrPoolClosed    = errors.New("pool closed")
	ErrSelfTest      = errors.New("self test failed")
	// ErrOutputRefused: the runtime refused the call's output (a wasi-stdio program's stdout
	// past PoolConfig.MaxOutputBytes), so the call failed.
	ErrOutputRefused = errors.New("output refused")
)

// Verdict is a handler's verdict on a message: the status its handle export returns, or
// the one it sets with batch_verdict.
type Verdict int

// The verdicts of docs/abi.md (its "statuses").
const (
	VerdictOK     Verdict = 0
	VerdictRetry  Verdict = 1
	VerdictReject Verdict = 2
)

// Input is the message handed to a guest.
type Input struct {
	ID           string
	Queue        string
	Body         []byte
	DequeueCount int64
	InsertedAt   time.Time
	OrderKey     string
}

// Emitted is one output message.
type Emitted struct {
	Queue string
	Body  []byte
}

// Result is how a handler call on one message ended: the guest's verdict, with its delay,
// reason and outputs, or the call's failure (Err). Pool.Call and CallInto return one, and
// CallBatch one per message.
type Result struct {
	Verdict    Verdict       // meaningful when Err is nil
	RetryAfter time.Duration // set by retry_after or batch_verdict; 0 means the binding's policy decides
	ErrorText  string        // set by set_error or batch_verdict (wqhost/v1), or the last stderr line (wasi-stdio)
	Outputs    []Emitted     // to send only if Err is nil and Verdict is VerdictOK
	// Err is why the call failed (trap, time limit, memory limit, unknown status, call never
	// ran); the poison policy settles the message. CallInto returns it too.
	Err  error
	HTTP HTTPReport // the message's outbound requests; a batch's are in BatchOutput
	// Usage is what the call cost (meter.go). CallInto sets it even when the call
	// failed, for the failing attempt's dead letter; a batch's is in BatchOutput.
	Usage Usage
	first [1]Emitted // backs Outputs so the common single output costs no extra allocation
	held  outputHold // the outputs' reservation from the tenant's memory budget
}

// Release gives back what the outputs reserved from the tenant's memory budget: call it once
// they are sent (or dropped). CallInto releases a Result's previous outputs when it reuses
// it. Idempotent.
func (o *Result) Release() { o.held.release() }

// outputHold is the reservation of a call's outputs (emit).
type outputHold struct {
	mem *memBudget
	n   int64
}

func (h *outputHold) release() {
	if h.n > 0 {
		h.mem.release(ConsumerMessages, h.n)
		h.n = 0
	}
}

// PoolConfig configures a Pool. Zero values take the documented defaults.
type PoolConfig struct {
	Binding      string
	MinInstances int // warm instances kept ready (wqhost/v1 and extism)
	MaxInstances int // instances at once, i.e. concurrent calls; default DefaultMaxInstances
	MaxUses      int // calls before an instance is replaced; 0 = unlimited
	// MaxMemoryBytes replaces an instance whose memory grew past it after a call; 0 = never.
	MaxMemoryBytes uint64
	// Timeout limits each call's wall time; 0 means no limit (and no per-call watchdog cost).
	// An instance's start function runs under StartTimeout.
	Timeout time.Duration
	// StartTimeout limits an instance's start function; 0 means max(Timeout,
	// StartTimeoutFloor), and no limit when Timeout is 0.
	StartTimeout   time.Duration
	Config         map[string]string
	OutputQueue    string                   // target of emit with an empty queue name
	AllowEmit      func(queue string) error // nil allows every named queue; an error gives ERR_DENIED (ERR_INVALID if it wraps ErrInvalidName)
	MaxOutputBytes int                      // per output; default DefaultMaxOutputBytes
	MaxOutputs     int                      // per message; default DefaultMaxOutputs
	// MaxOutputTotalBytes caps the bytes of all outputs of one message together (64
	// outputs of MaxOutputBytes each would be 256 MiB); default 4 × MaxOutputBytes.
	MaxOutputTotalBytes int
	Env                 map[string]string // environment variables granted to the guest
	ReadOnlyDir         string            // host directory mounted read-only at / ; empty = none
	StdioCapBytes       int               // guest stdout+stderr logged per call; default 16 KiB
	// IdleTimeout closes instances nobody used for that long, down to MinInstances, so an
	// idle pool holds no guest memory; its next call instantiates. 0 keeps them.
	IdleTimeout time.Duration
	HTTP        *HTTPPolicy // outbound HTTP policy; nil denies every request
	// MaxCallOutputBytes caps the bytes of all outputs of one call together: in a batch call
	// its messages' and its own, whose per-message caps add up to far more; default
	// DefaultMaxCallOutputBytes.
	MaxCallOutputBytes int
	// Batch declares that the binding hands its handler batches (CallBatch): NewPool refuses
	// a module that does not export wqhost_handle_batch, and a wasi-stdio module.
	Batch bool
	// Function is the export an Extism plugin's calls run (abi extism); default
	// DefaultExtismFunction.
	Function string
	// OnWarmStart, when set, is told what each instance the pool starts ahead of demand
	// cost (MinInstances at NewPool, refills after a discard): a Usage of its start alone
	// (Fuel = StartFuel, StartWall), which no call's Usage carries. Its start failing is
	// told too. Called from the goroutine that started it; Validate's instance is not told.
	OnWarmStart func(Usage)
}

// StartTimeoutFloor is the least time an instance's start function (a Go guest's runtime
// initialisation, a Rust guest's constructors) gets, whatever the call time limit: a
// handler limit of 100 ms is about the handler, and a Go runtime that takes 10 ms to start
// on a quiet machine takes hundreds on a loaded one. A start function that never returns is
// still stopped, at this floor.
const StartTimeoutFloor = 10 * time.Second

// startTimeout is the limit on an instance's start function: 0 (none) without a call limit.
func (c PoolConfig) startTimeout() time.Duration {
	if c.StartTimeout > 0 {
		return c.StartTimeout
	}
	if c.Timeout <= 0 {
		return 0
	}
	return max(c.Timeout, StartTimeoutFloor)
}

// PoolStats are a pool's counters.
type PoolStats struct {
	Instances, Idle, Busy   int
	Calls, Discarded, Traps int64
	Timeouts                int64
	HTTP                    HTTPReport // outbound requests of every call so far
}

// Pool runs one module version of one binding of one tenant.
type Pool struct {
	t        *Tenant
	m        *Module
	cfg      PoolConfig
	rt       wazero.Runtime
	cm       wazero.CompiledModule
	logger   *slog.Logger
	memLimit uint64
	httpc    *outbound // nil: outbound HTTP denied
	v        variant   // how the module was compiled: stop flag, close-on-context-done or neither
	stdio    bool      // the module's ABI is wasi-stdio: a command instance per call
	ext      string    // the Extism function each call runs (extism_call.go); "": not Extism
	memWhat  string    // names its instances in a memory budget's refusal
	// stackIdx is stackField of its instances' exports (stack.go), once an instance
	// exists: stackUnknown before.
	stackIdx atomic.Int32

	slots  *slots
	wg     sync.WaitGroup // refills in flight
	reapMu sync.Mutex     // held by a reap of idle instances (idle.go)
	closed atomic.Bool
	total  atomic.Int64
	// stuck counts start functions and self tests abandoned still running (bounded.go):
	// the compiled code they run stays while any does.
	stuck atomic.Int64

	discarded, traps, timeouts atomic.Int64
	http                       httpCounters

	// trace, when set by tests, sees every checkout (start) and return of an instance.
	trace func(inst *instance, start bool)
}

// NewPool creates a pool and warms MinInstances instances.
func (t *Tenant) NewPool(ctx context.Context, m *Module, cfg PoolConfig) (*Pool, error) {
	if err := cfg.checkBatch(m); err != nil {
		return nil, err
	}
	if cfg.MaxInstances <= 0 {
		cfg.MaxInstances = DefaultMaxInstances
	}
	if cfg.MinInstances > cfg.MaxInstances {
		cfg.MinInstances = cfg.MaxInstances
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if cfg.MaxOutputs <= 0 {
		cfg.MaxOutputs = DefaultMaxOutputs
	}
	if cfg.MaxOutputTotalBytes <= 0 {
		cfg.MaxOutputTotalBytes = 4 * cfg.MaxOutputBytes
	}
	if cfg.MaxCallOutputBytes <= 0 {
		cfg.MaxCallOutputBytes = DefaultMaxCallOutputBytes
	}
	if cfg.StdioCapBytes <= 0 {
		cfg.StdioCapBytes = DefaultStdioCapBytes
	}
	v := variant{terminate: cfg.Timeout > 0}
	if m.c.fuel != nil {
		v = variant{fuel: true}
	}
	rt, cm, err := t.compile(ctx, m, v)
	if err != nil && v.fuel && !errors.Is(err, ErrMemoryBudget) {
		// The instrumented bytes should always compile when the original did; if not, the
		// module still runs, with the slower time limit, and never unvalidated: wazero
		// validates whatever it compiles. When the original fails too (a memory minimum over
		// the tenant's limit, say), its own error is the answer, with no word of the
		// instrumented bytes, which were not at fault. Not after a budget's refusal: the
		// instrumented bytes were not at fault then either, and the smaller original
		// fitting would only trade the fuel counter for the room.
		fallback := variant{terminate: cfg.Timeout > 0}
		frt, fcm, ferr := t.compile(ctx, m, fallback)
		if ferr != nil {
			return nil, ferr
		}
		t.logger.Warn("fuel-instrumented module did not compile; time limit falls back to close-on-context-done",
			"module", m.name, "err", fmt.Errorf("%w: %w", errInstrumentedInvalid, err))
		v, rt, cm, err = fallback, frt, fcm, nil
	}
	if err != nil {
		return nil, err
	}
	p := &Pool{
		t: t, m: m, cfg: cfg, rt: rt, cm: cm, v: v, stdio: m.c.abi == ABIWasiStdio,
		logger:   t.logger.With("binding", cfg.Binding, "module", m.name, "digest", m.c.digest[:12]),
		memLimit: uint64(t.limits.MemoryPages) * PageBytes,
		slots:    newSlots(cfg.MaxInstances, &t.e.idle.now),
		memWhat:  fmt.Sprintf("binding %s (%s)", cfg.Binding, m.name),
	}
	p.stackIdx.Store(stackUnknown)
	if m.c.abi == ABIExtism {
		if p.ext, err = extismFunction(m, cfg, cm.ExportedFunctions()); err != nil {
			_ = p.Close(ctx)
			return nil, err
		}
	}
	if cfg.HTTP != nil {
		p.httpc = newOutbound(*cfg.HTTP, t.httpSem, t.e.httpTr)
	} else if m.c.usesHTTP {
		p.logger.Warn("module uses outbound HTTP but the binding has no http: policy; every request will be denied")
	}
	if m.c.abi != ABIWasiStdio {
		if cfg.IdleTimeout > 0 {
			t.e.watchIdle(p)
		}
		for range cfg.MinInstances {
			inst, cost, err := p.newInstance(ctx)
			p.chargeWarm(cost)
			if err != nil {
				_ = p.Close(ctx)
				return nil, err
			}
			p.slots.addIdle(inst)
		}
	}
	return p, nil
}

// Validate instantiates m once in the tenant's runtime and runs its wqhost_self_test export if
// it has one; hot reload calls it before switching a binding to a new version.
func (t *Tenant) Validate(ctx context.Context, m *Module, cfg PoolConfig) error {
	if m.c.abi == ABIWasiStdio {
		return nil
	}
	cfg.MinInstances, cfg.MaxInstances = 0, 1
	p, err := t.NewPool(ctx, m, cfg)
	if err != nil {
		return err
	}
	defer p.Close(ctx)
	// The check of a version being loaded: its start is not a tenant's message's cost.
	inst, _, err := p.newInstance(ctx)
	if err != nil {
		return err
	}
	if inst.selfTest == nil {
		inst.close(ctx)
		return nil
	}
	stack := []uint64{0}
	if cfg.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, cfg.Timeout)
		defer stop()
	}
	// The self test runs like a call: in the instance's context, under the time limit and
	// ctx; one stuck where no check reaches is abandoned (bounded), closing its instance
	// when it returns.
	err = p.bounded(ctx, "wqhost_self_test", func() error {
		inst.st.arm(ctx, cfg.Timeout)
		defer inst.st.disarm()
		defer context.AfterFunc(ctx, inst.cancel)()
		return inst.selfTest.CallWithStack(inst.ctx, stack)
	}, func() { inst.close(context.Background()) })
	if !errors.Is(err, ErrAbandoned) {
		inst.close(context.Background())
	}
	if err != nil {
		if !errors.Is(err, ErrTimeout) && (errors.Is(err, errTimeLimit) || errors.Is(ctx.Err(), context.DeadlineExceeded)) {
			return fmt.Errorf("runtime: %s: wqhost_self_test: %w: %w (%s): %w", m.name, ErrSelfTest, ErrTimeout, cfg.Timeout, err)
		}
		return fmt.Errorf("runtime: %s: wqhost_self_test: %w: %w", m.name, ErrSelfTest, err)
	}
	if rc := int32(stack[0]); rc != 0 {
		return fmt.Errorf("runtime: %s: wqhost_self_test returned %d: %w", m.name, rc, ErrSelfTest)
	}
	return nil
}

type instance struct {
	mod      api.Module
	handle   api.Function
	batch    api.Function // wqhost_handle_batch; nil when the module has none
	selfTest api.Function
	st       *callState
	ctx      *callCtx
	cancel   context.CancelFunc
	timer    *time.Timer
	stack    [1]uint64
	uses     int
	idleAt   time.Duration // when it last went idle (janitor.now)
	stdio    *cappedLog
	mem      *instanceMemory // its memories' allocator: budget refusals
	// growRefused counts the memory.grow refusals at the memory limit (instanceMemory):
	// a call that fails after one ran out of memory.
	growRefused *atomic.Int64
}

func (p *Pool) moduleConfig(stdio io.Writer) wazero.ModuleConfig {
	mc := wazero.NewModuleConfig().WithName("").
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader).
		WithStdout(stdio).WithStderr(stdio)
	for k, v := range p.cfg.Env {
		mc = mc.WithEnv(k, v)
	}
	if p.cfg.ReadOnlyDir != "" {
		mc = mc.WithFSConfig(wazero.NewFSConfig().WithReadOnlyDirMount(p.cfg.ReadOnlyDir, "/"))
	}
	return mc
}

// newInstance starts an instance and returns it with what its start cost (meter.go), which
// is set when it failed too, unless it had to be abandoned still running.
func (p *Pool) newInstance(ctx context.Context) (*instance, startCost, error) {
	st := &callState{pool: p}
	logw := &cappedLog{logger: p.logger, limit: p.cfg.StdioCapBytes}
	base, cancel := context.WithCancel(context.Background())
	// _initialize is called here, not by wazero (WithStartFunctions), so that its call's
	// stack is the host's to see and budget, as a handler call's (stack.go, runStart).
	mc := p.moduleConfig(logw).WithStartFunctions().WithNanosleep(st.sleep)
	// The start function is guest code too: one that never returns must not hang the host
	// (or its shutdown), so instantiation runs under the caller's context and the call time
	// limit. Only the instance's calls use the long-lived base context.
	sctx := context.WithValue(ctx, stateKey{}, st)
	startLimit := p.cfg.startTimeout()
	if startLimit > 0 {
		var stop context.CancelFunc
		sctx, stop = context.WithTimeout(sctx, startLimit)
		defer stop()
	}
	var mod api.Module
	var im *instanceMemory
	refused := new(atomic.Int64)
	t0 := p.t.e.since()
	// The instance's tables and globals live on the heap, outside its memory limit: up to
	// 9 MiB an instance at the caps, which 64 instances of a few bindings would multiply past
	// the host's memory. They are reserved before they are made (stack.go releases them).
	if err := p.t.mem.reserve(ConsumerInstances, p.m.c.instanceHeap, p.memWhat+" tables and globals"); err != nil {
		cancel()
		return nil, startCost{}, fmt.Errorf("runtime: tenant %s binding %s: instantiate %s: %w", p.t.name, p.cfg.Binding, p.m.name, err)
	}
	st.tableHeld = p.m.c.instanceHeap
	err := p.bounded(sctx, "start function", func() error {
		st.arm(ctx, startLimit)
		defer st.disarm()
		// The memory is mapped outside the Go heap (guestmem.go); settled here, in the
		// goroutine that instantiated, whether or not the caller waited for it.
		im = &instanceMemory{g: p.t.e.memories, limit: p.memLimit, refuse: refused, budget: p.t.mem, what: p.memWhat}
		var err error
		mod, err = p.rt.InstantiateModule(experimental.WithMemoryAllocator(sctx, im), p.cm, mc)
		if err == nil && p.v.fuel && st.fuelG == nil {
			// The fuel global is read here, so that the start function and an Extism
			// plugin's constructors below are metered.
			st.fuelG = mod.ExportedGlobal(fuelExport)
		}
		if err == nil {
			var started api.Module
			if started, err = st.runStart(sctx, mod, "_initialize"); err != nil {
				mod = nil // closed by runStart
			} else {
				mod = started
			}
		}
		if be := im.overdrawn(); be != nil {
			if mod != nil {
				_ = mod.Close(ctx)
				mod = nil
			}
			err = be
		} else if be := im.takeRefusal(); err != nil && be != nil {
			err = fmt.Errorf("%w: %w", be, err)
		}
		if err == nil && p.ext != "" {
			if err = p.initExtism(sctx, st, mod, im); err != nil {
				_ = mod.Close(ctx)
				mod = nil
			}
		}
		im.settle(mod)
		return err
	}, func() {
		// Abandoned: nobody will use the instance it made at last.
		if mod != nil {
			_ = mod.Close(context.Background())
		}
		cancel()
	})
	var cost startCost
	if !errors.Is(err, ErrAbandoned) {
		// f returned: st is this goroutine's again.
		cost = startCost{fuel: st.spent(), wall: p.t.e.since() - t0}
	}
	if err != nil {
		st.releaseStack()
		if errors.Is(err, ErrAbandoned) {
			return nil, cost, fmt.Errorf("runtime: tenant %s binding %s: instantiate %s: %w", p.t.name, p.cfg.Binding, p.m.name, err)
		}
		cancel()
		if (errors.Is(err, errTimeLimit) || errors.Is(sctx.Err(), context.DeadlineExceeded)) && ctx.Err() == nil {
			err = fmt.Errorf("start function: %w (%s): %w", ErrTimeout, startLimit, err)
		}
		return nil, cost, fmt.Errorf("runtime: tenant %s binding %s: instantiate %s: %w", p.t.name, p.cfg.Binding, p.m.name, err)
	}
	callBase := context.Context(base)
	if p.v.fuel {
		// Fuel ends an armed call, never a cancelled context, and wazero asks the call's
		// context for a value on every call: Background answers without a walk up a chain.
		callBase = context.Background()
	}
	inst := &instance{
		growRefused: refused, mem: im,
		mod: mod, handle: mod.ExportedFunction(p.handleName()), selfTest: mod.ExportedFunction("wqhost_self_test"),
		st: st, ctx: &callCtx{Context: callBase, st: st, bare: p.v.fuel}, cancel: cancel, stdio: logw,
		batch: mod.ExportedFunction("wqhost_handle_batch"),
	}
	if p.stackIdx.Load() == stackUnknown && inst.handle != nil {
		p.stackIdx.Store(int32(stackField(inst.handle)))
	}
	if p.cfg.Timeout > 0 && !p.v.fuel {
		// One timer per instance, re-armed per call, is cheaper than a deadline context per call.
		inst.timer = time.AfterFunc(time.Hour, cancel)
		inst.timer.Stop()
	}
	p.total.Add(1)
	return inst, cost, nil
}

func (inst *instance) close(ctx context.Context) {
	if inst.timer != nil {
		inst.timer.Stop()
	}
	inst.st.releaseStack()
	inst.cancel()
	_ = inst.mod.Close(ctx)
	if inst.st.ext != nil {
		// Its pages and reservation go now, as the guest memory's do; the mapping once
		// the module is unreachable (extism_kernel.go).
		inst.st.ext.k.close()
	}
}

func (p *Pool) discard(inst *instance) {
	inst.close(context.Background())
	p.discarded.Add(1)
	p.total.Add(-1)
	if p.closed.Load() || int(p.total.Load()) >= p.cfg.MinInstances {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		// A refill holds a call slot like a call does, so instances never exceed MaxInstances.
		if !p.slots.tryAcquire() {
			return
		}
		if p.closed.Load() || int(p.total.Load()) >= p.cfg.MinInstances {
			p.slots.release(nil)
			return
		}
		inst, cost, err := p.newInstance(context.Background())
		p.chargeWarm(cost)
		if err != nil {
			p.slots.release(nil)
			p.logger.Warn("refilling pool", "err", err)
			return
		}
		if !p.slots.release(inst) {
			inst.close(context.Background())
			p.total.Add(-1)
		}
	}()
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	idle, busy, calls := p.slots.counts()
	return PoolStats{
		Instances: int(p.total.Load()), Idle: idle, Busy: busy,
		Calls: calls, Discarded: p.discarded.Load(), Traps: p.traps.Load(), Timeouts: p.timeouts.Load(),
		HTTP: p.http.load(),
	}
}

// Close stops new calls, waits for calls in flight (or ctx), and closes every instance.
func (p *Pool) Close(ctx context.Context) error {
	if p.closed.Swap(true) {
		return nil
	}
	if p.cfg.IdleTimeout > 0 {
		p.t.e.unwatchIdle(p)
		// A reap in progress finishes before the instances and the compiled code go.
		p.reapMu.Lock()
		//lint:ignore SA2001 an empty critical section is the barrier
		p.reapMu.Unlock()
	}
	var err error
	if werr := p.slots.waitIdle(ctx); werr != nil {
		err = fmt.Errorf("runtime: closing pool %s: waiting for calls in flight: %w", p.cfg.Binding, werr)
		// The tenant's runtime stays open until they return (Tenant.close).
		p.t.late.Add(1)
		go func() {
			defer p.t.late.Add(-1)
			_ = p.slots.waitIdle(context.Background())
		}()
	} else {
		// Refills hold a slot while they work, so with no slot held they are done or will
		// give up at once.
		p.wg.Wait()
	}
	for _, inst := range p.slots.drainIdle() {
		inst.close(ctx)
		p.total.Add(-1)
	}
	if err == nil && p.stuck.Load() > 0 {
		err = fmt.Errorf("runtime: closing pool %s: %d start functions or self tests abandoned still running; their compiled code stays", p.cfg.Binding, p.stuck.Load())
	}
	if err == nil {
		// With calls still in flight the compiled code stays: a trap unwinding through it
		// needs it registered.
		p.t.release(ctx, p.m, p.v)
	}
	return err
}
