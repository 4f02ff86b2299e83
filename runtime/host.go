package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

const hostModuleName = "wqhost"

// ErrInvalidName is what a PoolConfig.AllowEmit error wraps for a queue name that is
// malformed (the guest gets ERR_INVALID) rather than refused (ERR_DENIED).
var ErrInvalidName = errors.New("invalid name")

// Return codes of the host functions (docs/abi.md).
const (
	errNotFound = -1
	errDenied   = -2
	errTooLarge = -3
	errLimit    = -4
	errInvalid  = -5
	// errBudget is emit's answer when the tenant's memory budget refused the output: not
	// a code a guest sees (emitted ends the call instead).
	errBudget = -1000
)

const (
	maxLogLine     = 4096
	maxLogsPerCall = 100
	// maxLogBytesPerCall bounds the host log one message can cause through log (100 full
	// lines would be 400 KiB); the lines past it are counted, and one line says how many.
	maxLogBytesPerCall = 32 << 10
)

// HostCallError is a guest's misuse of a host function, such as a pointer outside its memory.
// It traps the instance.
type HostCallError struct {
	Func string // the host function, e.g. "wqhost.msg_body"
	Msg  string
	// Err is the cause when the host refused rather than the guest misused: a memory
	// budget's *BudgetError for an Extism alloc.
	Err error
}

func (e *HostCallError) Error() string {
	if e.Err != nil {
		return e.Func + ": " + e.Msg + ": " + e.Err.Error()
	}
	return e.Func + ": " + e.Msg
}

// Unwrap is the cause, if any: errors.Is(err, ErrMemoryBudget) for a budget's refusal.
func (e *HostCallError) Unwrap() error { return e.Err }

type stateKey struct{}

// callState is one instance's view of the message being handled; host functions find it in
// the instance's long-lived context, so the hot path allocates nothing to reach it.
type callState struct {
	pool      *Pool
	in        *Input       // the message of a single call; nil in a batch call and a self test
	out       *Result      // the call's status, reason and own outputs; nil in a self test
	logs      int          // log calls of this call
	logBytes  int          // bytes of them written to the host log
	dropped   int          // log lines past the caps, reported once after the call
	callBytes int          // bytes of every output of this call (PoolConfig.MaxCallOutputBytes)
	held      outputHold   // what the call's outputs reserved (emit), handed to its Result
	refused   *BudgetError // the budget's refusal of the last emit (errBudget)
	// running is the export a call runs (invoke), whose stack a yield measures (stack.go);
	// stackHeld what the instance's stacks reserved from the tenant's budget.
	running   api.Function
	stackHeld int64
	tableHeld int64 // what the instance's tables and globals reserved (Pool.newInstance)
	http      httpState
	ext       *extismState // an Extism plugin's kernel (extism.go); nil for other ABIs
	// work is the host work charged since the last check of the call's limits (charge.go).
	work int
	// workDone is the host work of every earlier check (charge.go), for metering.
	workDone int64
	// fuelG is the instance's fuel global (meter.go); nil without a fuel counter.
	fuelG api.Global
	// refilled is the fuel spent before each of the instance's refills, summed (meter.go).
	refilled int64
	// start is when the call running now got its instance (Engine.since; meter.go).
	start time.Duration
	// cfgKeyMax is one more than the length of the pool's longest config key; 0: not yet
	// worked out. config_get finds no longer key without hashing it.
	cfgKeyMax int

	// The call's batch (batch.go): its messages ([in] in a single call, none in a self
	// test), their verdicts and, in a batch call, their outputs, and which have a verdict.
	batch []*Input
	res   []Result
	vset  []bool
	// Backing for a single call's batch of one and a batch call's flags, reused by every
	// call of the instance so neither allocates.
	one    [1]*Input
	oneRes [1]Result
	oneSet [1]bool
	vbuf   []bool

	// The limits of the call running now, for yield (yield.go); zero between calls.
	caller   context.Context    // the caller's context; nil: not armed
	limit    time.Duration      // the call's time limit; 0: none
	deadline time.Duration      // when it ends, on the engine's clock (Engine.since); 0: none
	turn     time.Duration      // when the call last yielded the processor; 0: clock not started
	wctx     context.Context    // waitCtx's context, made on first use in a call
	wcancel  context.CancelFunc // releases wctx
}

// callCtx is the context an instance's calls run in: the watchdog cancels it, and host
// functions reach the call state by a type assertion rather than a walk up a context chain
// (three host calls per no-op message made that walk a measurable part of dispatch).
type callCtx struct {
	context.Context
	st *callState
	// bare: Context is Background, which holds no values. wazero asks for one on every
	// call; answering it here saves a second dynamic call.
	bare bool
}

// Value implements context.Context.
func (c *callCtx) Value(key any) any {
	if _, ok := key.(stateKey); ok {
		return c.st
	}
	if c.bare {
		return nil
	}
	return c.Context.Value(key)
}

func stateOf(ctx context.Context) *callState {
	if c, ok := ctx.(*callCtx); ok {
		return c.st
	}
	st, _ := ctx.Value(stateKey{}).(*callState)
	return st
}

// mem returns guest memory [ptr, ptr+n) or traps naming fn.
func mem(m api.Module, fn string, ptr, n uint32) []byte {
	b, ok := m.Memory().Read(ptr, n)
	if !ok {
		panic(&HostCallError{Func: "wqhost." + fn, Msg: fmt.Sprintf("range [%d, %d+%d) is outside the guest memory of %d bytes", ptr, ptr, n, m.Memory().Size())})
	}
	return b
}

func i32(v int32) uint64 { return uint64(uint32(v)) }

type hostFn struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
	fn      api.GoModuleFunc
}

var (
	tI32 = api.ValueTypeI32
	tI64 = api.ValueTypeI64
)

func hostFuncs() []hostFn {
	return []hostFn{
		{"msg_body_len", nil, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			n := 0
			if st != nil && st.in != nil {
				n = len(st.in.Body)
			}
			s[0] = i32(int32(n))
		}},
		{"msg_body", []api.ValueType{tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			dst := mem(m, "msg_body", uint32(s[0]), uint32(s[1]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			var body []byte
			if st != nil && st.in != nil {
				body = st.in.Body
			}
			s[0] = i32(int32(st.copyOut(ctx, dst, body)))
		}},
		{"msg_meta", []api.ValueType{tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			key := mem(m, "msg_meta", uint32(s[0]), uint32(s[1]))
			dst := mem(m, "msg_meta", uint32(s[2]), uint32(s[3]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			if len(key) > maxMetaKeyBytes {
				s[0] = i32(errInvalid)
				return
			}
			var in *Input
			if st != nil {
				in = st.in
			}
			s[0] = i32(st.copyMeta(in, key, dst))
		}},
		{"config_get", []api.ValueType{tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			key := mem(m, "config_get", uint32(s[0]), uint32(s[1]))
			dst := mem(m, "config_get", uint32(s[2]), uint32(s[3]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			var v string
			ok := false
			if st != nil && st.pool != nil && len(key) < st.configKeyMax() {
				st.charge(ctx, copyCharge(len(key)))
				v, ok = st.pool.cfg.Config[string(key)]
			}
			if !ok {
				s[0] = i32(errNotFound)
				return
			}
			copy(dst, v)
			s[0] = i32(int32(len(v)))
		}},
		{"log", []api.ValueType{tI32, tI32, tI32}, nil, func(ctx context.Context, m api.Module, s []uint64) {
			b := mem(m, "log", uint32(s[1]), uint32(s[2]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			if st == nil || st.pool == nil {
				return
			}
			st.logs++
			if len(b) > maxLogLine {
				b = b[:maxLogLine]
			}
			if st.logs > maxLogsPerCall || st.logBytes+len(b) > maxLogBytesPerCall {
				st.dropped++
				return
			}
			st.logBytes += len(b)
			st.charge(ctx, logLineCharge)
			st.pool.logger.Log(ctx, slog.Level(int32(s[0])), string(b), st.callee().logAttrs("source", "guest")...)
		}},
		{"set_error", []api.ValueType{tI32, tI32}, nil, func(ctx context.Context, m api.Module, s []uint64) {
			b := mem(m, "set_error", uint32(s[0]), uint32(s[1]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge+copyCharge(min(len(b), maxLogLine)))
			if st != nil && st.out != nil {
				st.out.ErrorText = reasonText(b)
			}
		}},
		{"retry_after", []api.ValueType{tI64}, nil, func(ctx context.Context, m api.Module, s []uint64) {
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			if st != nil && st.out != nil {
				st.out.RetryAfter = retryDelay(int64(s[0]))
			}
		}},
		{"emit", []api.ValueType{tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			q := mem(m, "emit", uint32(s[0]), uint32(s[1]))
			body := mem(m, "emit", uint32(s[2]), uint32(s[3]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			if st == nil || st.out == nil || st.pool == nil {
				// Self-test and other message-less calls have nowhere to send to.
				s[0] = i32(errDenied)
				return
			}
			s[0] = i32(st.emitted(st.emit(&st.out.Outputs, q, body)))
		}},
	}
}

// allHostFuncs is every function the wqhost host module exports (the benchmarks' raw host
// registers the same set, so a guest that links against the real module links against it).
func allHostFuncs() []hostFn {
	return append(append(append(append(hostFuncs(), batchHostFuncs()...), httpHostFuncs()...), faultHostFuncs()...), yieldFn())
}

func hostModule(rt wazero.Runtime) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(hostModuleName)
	for _, f := range allHostFuncs() {
		b.NewFunctionBuilder().WithGoModuleFunction(f.fn, f.params, f.results).WithName(f.name).Export(f.name)
	}
	return b
}

func validQueueName(q []byte) bool {
	if len(q) == 0 || len(q) > 255 {
		return false
	}
	for _, c := range q {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// reasonText is a guest's failure text (set_error, batch_verdict) as the host keeps it: at
// most maxLogLine bytes, and valid UTF-8, since a reason travels in queue attributes and
// JSON; printing escapes it for the terminal (cmd/wqhost).
func reasonText(b []byte) string {
	if len(b) > maxLogLine {
		b = b[:maxLogLine]
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) > maxLogLine {
		// Replacement characters (3 bytes for each run of bad bytes) grew it: cut at a
		// rune boundary.
		n := maxLogLine
		for !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}

// retryDelay is a guest's retry delay in milliseconds (retry_after, batch_verdict): a
// negative one is 0 (the binding's policy decides), and a huge one saturates instead of
// overflowing into a negative delay (which meant "retry at once"); the poison policy clamps
// it to the binding's max_delay.
func retryDelay(ms int64) time.Duration {
	return time.Duration(min(max(ms, 0), int64(math.MaxInt64/time.Millisecond))) * time.Millisecond
}

// emitted returns emit's code rc to the guest, but for errBudget, which ends the call with
// the budget's refusal: only in a host function, inside the guest's call.
func (st *callState) emitted(rc int32) int32 {
	if rc == errBudget {
		panic(st.refused)
	}
	return rc
}

// takeHeld returns the reservation of the call's outputs, which the caller's Result or
// BatchOutput holds from then on.
func (st *callState) takeHeld() outputHold {
	h := st.held
	st.held = outputHold{}
	return h
}

// emit queues an output to *dst, the outputs of one message (or of a batch call itself),
// under the limits of one message and the call's MaxCallOutputBytes.
func (st *callState) emit(dst *[]Emitted, q, body []byte) int32 {
	cfg := &st.pool.cfg
	if len(*dst) >= cfg.MaxOutputs {
		return errLimit
	}
	if len(body) > cfg.MaxOutputBytes {
		return errTooLarge
	}
	total := len(body)
	for _, o := range *dst {
		total += len(o.Body)
	}
	if cfg.MaxOutputTotalBytes > 0 && total > cfg.MaxOutputTotalBytes {
		return errTooLarge
	}
	if cfg.MaxCallOutputBytes > 0 && st.callBytes+len(body) > cfg.MaxCallOutputBytes {
		return errTooLarge
	}
	var queue string
	if len(q) == 0 {
		if cfg.OutputQueue == "" {
			return errInvalid
		}
		queue = cfg.OutputQueue
	} else {
		if !validQueueName(q) {
			return errInvalid
		}
		queue = string(q)
		if cfg.AllowEmit != nil {
			if err := cfg.AllowEmit(queue); err != nil {
				if errors.Is(err, ErrInvalidName) {
					return errInvalid
				}
				return errDenied
			}
		}
	}
	// The body is copied out: guest memory is reused by the next call. The caps above bound
	// it (MaxOutputBytes), so it is one piece, charged to the account the next host call
	// checks.
	st.work += copyCharge(len(body))
	if err := st.pool.t.mem.reserve(ConsumerMessages, int64(len(body)), st.pool.memWhat); err != nil {
		// Not the guest's fault: the call fails (emitted), and the message is retried once
		// there is room (Pool.failure names the budget).
		st.refused = err.(*BudgetError)
		return errBudget
	}
	st.held.mem = st.pool.t.mem
	st.held.n += int64(len(body))
	cp := make([]byte, len(body))
	copy(cp, body)
	*dst = append(*dst, Emitted{Queue: queue, Body: cp})
	st.callBytes += len(body)
	return 0
}

// configKeyMax is one more than the length of the pool's longest config key: config_get
// refuses a longer key, which no entry can match, before hashing it.
func (st *callState) configKeyMax() int {
	if st.cfgKeyMax == 0 {
		n := 0
		for k := range st.pool.cfg.Config {
			n = max(n, len(k))
		}
		st.cfgKeyMax = n + 1
	}
	return st.cfgKeyMax
}

// copyMeta is msg_meta and batch_meta: it copies what fits of message in's value for key to
// dst and returns its full length, or ERR_NOT_FOUND.
func (st *callState) copyMeta(in *Input, key, dst []byte) int32 {
	var scratch [64]byte
	v, ok := st.meta(in, string(key), scratch[:0])
	if !ok {
		return errNotFound
	}
	copy(dst, v)
	return int32(len(v))
}

// meta returns message in's metadata value for key, formatting numbers into scratch. With in
// nil (msg_meta in a batch call) only the call's keys, tenant, binding and max_output_bytes,
// are known; in a self test, which has no message, none.
func (st *callState) meta(in *Input, key string, scratch []byte) ([]byte, bool) {
	if st == nil || in == nil && st.out == nil {
		return nil, false
	}
	switch key {
	case "tenant":
		return []byte(st.pool.t.name), true
	case "binding":
		return []byte(st.pool.cfg.Binding), true
	case "max_output_bytes":
		// The largest output emit takes: the tenant's limit, or less where the backend's
		// queues carry less (PoolConfig.MaxOutputBytes).
		return strconv.AppendInt(scratch, int64(st.pool.cfg.MaxOutputBytes), 10), true
	}
	if in == nil {
		return nil, false
	}
	switch key {
	case "id":
		return []byte(in.ID), true
	case "queue":
		return []byte(in.Queue), true
	case "dequeue_count":
		return strconv.AppendInt(scratch, in.DequeueCount, 10), true
	case "inserted_at":
		return in.InsertedAt.UTC().AppendFormat(scratch, time.RFC3339Nano), true
	case "order_key":
		if in.OrderKey == "" {
			return nil, false
		}
		return []byte(in.OrderKey), true
	}
	return nil, false
}
