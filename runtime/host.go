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
}

func (e *HostCallError) Error() string { return e.Func + ": " + e.Msg }

type stateKey struct{}

// callState is one instance's view of the message being handled; host functions find it in
// the instance's long-lived context, so the hot path allocates nothing to reach it.
type callState struct {
	pool     *Pool
	in       *Input
	out      *Output
	logs     int // log calls of this call
	logBytes int // bytes of them written to the host log
	dropped  int // log lines past the caps, reported once after the call
	http     httpState

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
}

// Value implements context.Context.
func (c *callCtx) Value(key any) any {
	if _, ok := key.(stateKey); ok {
		return c.st
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
			n := 0
			if st != nil && st.in != nil {
				n = len(st.in.Body)
			}
			s[0] = i32(int32(n))
		}},
		{"msg_body", []api.ValueType{tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			dst := mem(m, "msg_body", uint32(s[0]), uint32(s[1]))
			st := stateOf(ctx)
			var body []byte
			if st != nil && st.in != nil {
				body = st.in.Body
			}
			s[0] = i32(int32(copy(dst, body)))
		}},
		{"msg_meta", []api.ValueType{tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			key := mem(m, "msg_meta", uint32(s[0]), uint32(s[1]))
			dst := mem(m, "msg_meta", uint32(s[2]), uint32(s[3]))
			var scratch [64]byte
			v, ok := stateOf(ctx).meta(string(key), scratch[:0])
			if !ok {
				s[0] = i32(errNotFound)
				return
			}
			copy(dst, v)
			s[0] = i32(int32(len(v)))
		}},
		{"config_get", []api.ValueType{tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			key := mem(m, "config_get", uint32(s[0]), uint32(s[1]))
			dst := mem(m, "config_get", uint32(s[2]), uint32(s[3]))
			st := stateOf(ctx)
			var v string
			ok := false
			if st != nil && st.pool != nil {
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
			level := slog.Level(int32(s[0]))
			id := ""
			if st.in != nil {
				id = st.in.ID
			}
			st.pool.logger.Log(ctx, level, string(b), "message_id", id, "source", "guest")
		}},
		{"set_error", []api.ValueType{tI32, tI32}, nil, func(ctx context.Context, m api.Module, s []uint64) {
			b := mem(m, "set_error", uint32(s[0]), uint32(s[1]))
			if st := stateOf(ctx); st != nil && st.out != nil {
				if len(b) > maxLogLine {
					b = b[:maxLogLine]
				}
				// Stored as valid UTF-8 (a reason travels in queue attributes and JSON);
				// printing escapes it for the terminal (cmd/wqhost).
				st.out.ErrorText = strings.ToValidUTF8(string(b), "\uFFFD")
			}
		}},
		{"retry_after", []api.ValueType{tI64}, nil, func(ctx context.Context, m api.Module, s []uint64) {
			if st := stateOf(ctx); st != nil && st.out != nil {
				// Saturate instead of overflowing into a negative delay (which meant "retry at
				// once"): the poison policy clamps it to the binding's max_delay.
				ms := min(max(int64(s[0]), 0), int64(math.MaxInt64/time.Millisecond))
				st.out.RetryAfter = time.Duration(ms) * time.Millisecond
			}
		}},
		{"emit", []api.ValueType{tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			q := mem(m, "emit", uint32(s[0]), uint32(s[1]))
			body := mem(m, "emit", uint32(s[2]), uint32(s[3]))
			st := stateOf(ctx)
			if st == nil || st.out == nil || st.pool == nil {
				// Self-test and other message-less calls have nowhere to send to.
				s[0] = i32(errDenied)
				return
			}
			s[0] = i32(st.emit(q, body))
		}},
	}
}

func hostModule(rt wazero.Runtime) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(hostModuleName)
	for _, f := range append(append(hostFuncs(), httpHostFuncs()...), yieldFn()) {
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

func (st *callState) emit(q, body []byte) int32 {
	cfg := &st.pool.cfg
	if len(st.out.Outputs) >= cfg.MaxOutputs {
		return errLimit
	}
	if len(body) > cfg.MaxOutputBytes {
		return errTooLarge
	}
	total := len(body)
	for _, o := range st.out.Outputs {
		total += len(o.Body)
	}
	if cfg.MaxOutputTotalBytes > 0 && total > cfg.MaxOutputTotalBytes {
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
	// The body is copied out: guest memory is reused by the next call.
	cp := make([]byte, len(body))
	copy(cp, body)
	st.out.Outputs = append(st.out.Outputs, Emitted{Queue: queue, Body: cp})
	return 0
}

// meta returns the metadata value for key, formatting numbers into scratch.
func (st *callState) meta(key string, scratch []byte) ([]byte, bool) {
	if st == nil || st.in == nil {
		return nil, false
	}
	in := st.in
	switch key {
	case "id":
		return []byte(in.ID), true
	case "queue":
		return []byte(in.Queue), true
	case "tenant":
		return []byte(st.pool.t.name), true
	case "binding":
		return []byte(st.pool.cfg.Binding), true
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
