package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// The Extism ABI (docs/abi.md, "Extism plugins"): the extism:host/env functions an Extism
// plugin imports, implemented natively by the host.
//
// Extism's own hosts keep a plugin's "memory blocks" (its input, output, error, config and
// var values, HTTP bodies) in the linear memory of a second module, the Extism kernel, and
// every kernel function is a call from Go into that module. The plugin reaches those blocks
// only through the load/store host functions, never by pointer, so here the kernel is a byte
// arena per instance on the Go side: a block's handle is its offset in the arena, blocks are
// allocated by bumping a pointer (a freed block is reused first-fit, the last one given back
// at once), and the arena is emptied before each call. Every function is charged like the
// wqhost/v1 ones (charge.go), and every offset is checked against the arena: a bad one traps
// the call naming the function, as a bad pointer does for a wqhost/v1 guest.

// ABIExtism is the Extism plugin ABI: imports from extism:host/env, the binding's function
// export (PoolConfig.Function) called once per message.
const ABIExtism ABI = "extism"

const (
	extismModuleName = "extism:host/env"
	// DefaultExtismFunction is the export an Extism binding calls when it names none.
	DefaultExtismFunction = "handle"
	// DefaultExtismVarBytes caps one instance's vars (var_set), keys and values together;
	// Extism's own default.
	DefaultExtismVarBytes = 1 << 20
	// extismBase is the first offset a block can have: 0 is the null handle.
	extismBase = 8
	// extismKeepBytes is the most arena an idle instance keeps for its next call.
	extismKeepBytes = 1 << 20
	// extismBlockRecord is what a block's record (extBlock) costs, counted against the limit.
	extismBlockRecord = 32
	// extismReuseScan is how many of the latest blocks alloc looks through for a freed one.
	extismReuseScan = 64
	// extismUserHeader names the credential (PoolConfig.HTTP.Credentials) an Extism guest's
	// request asks for; the host removes it before sending.
	extismUserHeader = "Wqhost-Credential"
)

// extismState is one instance's Extism kernel: its memory blocks, the current call's input,
// output and error, and its vars, which live as long as the instance (Extism's semantics).
type extismState struct {
	arena  []byte
	blocks []extBlock // by offset
	freed  int        // blocks marked free
	limit  int        // most bytes the arena may hold (the tenant's memory limit)

	inArena      bool // the input is a block (input_offset, input_set) rather than the message body
	inOff, inLen uint64
	outOff       uint64
	outLen       uint64
	outSet       bool
	errOff       uint64
	vars         map[string][]byte
	varBytes     int
	httpStatus   int32
	httpHeaders  []byte // the last response's headers as a JSON object; nil: no response
}

type extBlock struct {
	off, size, cap uint64
	free           bool
}

func newExtismState(limit uint64) *extismState {
	return &extismState{limit: int(min(limit, math.MaxInt32)), arena: make([]byte, extismBase, 4096)}
}

// begin empties the kernel for a call: every block, the output, the error and the last
// response go; the vars stay.
func (x *extismState) begin() {
	x.reset()
	x.inArena, x.inOff, x.inLen = false, 0, 0
	x.httpStatus, x.httpHeaders = 0, nil
}

// reset is the kernel's reset: every block freed, the output and error forgotten.
func (x *extismState) reset() {
	if cap(x.arena) > extismKeepBytes {
		x.arena = make([]byte, extismBase, 4096)
	}
	x.arena = x.arena[:extismBase]
	if cap(x.blocks) > extismKeepBytes/extismBlockRecord {
		x.blocks = nil
	}
	x.blocks = x.blocks[:0]
	x.freed = 0
	x.outOff, x.outLen, x.outSet, x.errOff = 0, 0, false, 0
	if x.inArena {
		x.inArena, x.inOff, x.inLen = false, 0, 0
	}
}

func extismTrap(fn, format string, args ...any) *HostCallError {
	return &HostCallError{Func: extismModuleName + "." + fn, Msg: fmt.Sprintf(format, args...)}
}

// find returns the index of the block at off, or -1.
func (x *extismState) find(off uint64) int {
	i, ok := slices.BinarySearchFunc(x.blocks, off, func(b extBlock, o uint64) int {
		switch {
		case b.off < o:
			return -1
		case b.off > o:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// extAlloc is the kernel's alloc: a zeroed block of n bytes (0 for n == 0), its work charged.
func (st *callState) extAlloc(ctx context.Context, n uint64) uint64 {
	x := st.ext
	st.charge(ctx, callCharge)
	if n == 0 {
		return 0
	}
	if x.freed > 0 {
		// First fit among the most recent blocks only: a scan of every block would be work
		// the guest could make grow without bound between two checks of the time limit.
		for i := len(x.blocks) - 1; i >= max(0, len(x.blocks)-extismReuseScan); i-- {
			b := &x.blocks[i]
			if b.free && b.cap >= n {
				b.free, b.size = false, n
				x.freed--
				st.zero(ctx, x.arena[b.off:b.off+n])
				return b.off
			}
		}
	}
	off := (uint64(len(x.arena)) + 7) &^ 7
	// Each block's record counts against the limit too, so a million one-byte blocks cannot
	// hold far more host memory than the arena's bytes say.
	records := uint64(len(x.blocks)+1) * extismBlockRecord
	if n > uint64(x.limit) || off+n+records > uint64(x.limit) {
		panic(extismTrap("alloc", "a block of %d bytes would take the instance's kernel memory past its limit of %d bytes", n, x.limit))
	}
	end := int(off + n)
	if end > cap(x.arena) {
		st.charge(ctx, copyCharge(len(x.arena)))
		x.arena = slices.Grow(x.arena, end-len(x.arena))
	}
	x.arena = x.arena[:end]
	st.zero(ctx, x.arena[off:end])
	x.blocks = append(x.blocks, extBlock{off: off, size: n, cap: n})
	return off
}

// zero clears b a piece at a time, charging each piece.
func (st *callState) zero(ctx context.Context, b []byte) {
	for off := 0; off < len(b); off += pieceBytes {
		end := min(off+pieceBytes, len(b))
		st.charge(ctx, copyCharge(end-off))
		clear(b[off:end])
	}
}

// free frees the block at off; the last block gives its bytes back at once.
func (x *extismState) free(off uint64) {
	i := x.find(off)
	if i < 0 || x.blocks[i].free {
		return
	}
	if i == len(x.blocks)-1 {
		x.blocks = x.blocks[:i]
		x.arena = x.arena[:off]
		return
	}
	x.blocks[i].free = true
	x.freed++
}

// length is the size of the live block at off, 0 when there is none.
func (x *extismState) length(off uint64) uint64 {
	if i := x.find(off); i >= 0 && !x.blocks[i].free {
		return x.blocks[i].size
	}
	return 0
}

// bytes is the live block at off, or traps naming fn; off 0 is the empty block.
func (x *extismState) bytes(fn string, off uint64) []byte {
	if off == 0 {
		return nil
	}
	i := x.find(off)
	if i < 0 || x.blocks[i].free {
		panic(extismTrap(fn, "%d is not the offset of a memory block", off))
	}
	return x.arena[off : off+x.blocks[i].size]
}

// span returns arena[off, off+n) or traps naming fn.
func (x *extismState) span(fn string, off, n uint64) []byte {
	if off < extismBase || n > uint64(len(x.arena)) || off > uint64(len(x.arena))-n {
		panic(extismTrap(fn, "range [%d, %d+%d) is outside the kernel memory of %d bytes", off, off, n, len(x.arena)))
	}
	return x.arena[off : off+n]
}

// extInput is the call's input as it stands: the message body, or the block input_set or
// input_offset made of it.
func (st *callState) extInput() []byte {
	x := st.ext
	if x.inArena {
		return x.arena[x.inOff : x.inOff+x.inLen]
	}
	if st.in != nil {
		return st.in.Body
	}
	return nil
}

// newBlock copies b into a new block and returns its offset (0 for an empty b).
func (st *callState) newBlock(ctx context.Context, b []byte) uint64 {
	off := st.extAlloc(ctx, uint64(len(b)))
	if off != 0 {
		st.copyOut(ctx, st.ext.arena[off:off+uint64(len(b))], b)
	}
	return off
}

// extState is the running call's state for an Extism host function; a guest that imports
// extism:host/env into a pool of another ABI (which validation refuses) traps.
func extState(ctx context.Context, fn string) *callState {
	st := stateOf(ctx)
	if st == nil || st.ext == nil {
		panic(extismTrap(fn, "called outside an Extism plugin's call"))
	}
	st.charge(ctx, callCharge)
	return st
}

type extFn struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
	fn      func(ctx context.Context, st *callState, s []uint64)
}

var (
	i64s   = []api.ValueType{tI64}
	i64x2  = []api.ValueType{tI64, tI64}
	i32s   = []api.ValueType{tI32}
	i64i32 = []api.ValueType{tI64, tI32}
)

// extismKernelFuncs are the kernel's functions: memory blocks, input, output and error.
func extismKernelFuncs() []extFn {
	return []extFn{
		{"alloc", i64s, i64s, func(ctx context.Context, st *callState, s []uint64) { s[0] = st.extAlloc(ctx, s[0]) }},
		{"free", i64s, nil, func(ctx context.Context, st *callState, s []uint64) { st.ext.free(s[0]) }},
		{"length", i64s, i64s, func(ctx context.Context, st *callState, s []uint64) { s[0] = st.ext.length(s[0]) }},
		{"length_unsafe", i64s, i64s, func(ctx context.Context, st *callState, s []uint64) { s[0] = st.ext.length(s[0]) }},
		{"load_u8", i64s, i32s, func(ctx context.Context, st *callState, s []uint64) {
			s[0] = uint64(st.ext.span("load_u8", s[0], 1)[0])
		}},
		{"load_u64", i64s, i64s, func(ctx context.Context, st *callState, s []uint64) {
			s[0] = le64(st.ext.span("load_u64", s[0], 8))
		}},
		{"store_u8", i64i32, nil, func(ctx context.Context, st *callState, s []uint64) {
			st.ext.span("store_u8", s[0], 1)[0] = byte(s[1])
		}},
		{"store_u64", i64x2, nil, func(ctx context.Context, st *callState, s []uint64) {
			putLE64(st.ext.span("store_u64", s[0], 8), s[1])
		}},
		{"reset", nil, nil, func(ctx context.Context, st *callState, s []uint64) { st.ext.reset() }},
		{"memory_bytes", nil, i64s, func(ctx context.Context, st *callState, s []uint64) { s[0] = uint64(len(st.ext.arena)) }},
		{"input_length", nil, i64s, func(ctx context.Context, st *callState, s []uint64) { s[0] = uint64(len(st.extInput())) }},
		{"input_load_u8", i64s, i32s, func(ctx context.Context, st *callState, s []uint64) {
			in := st.extInput()
			if s[0] >= uint64(len(in)) {
				panic(extismTrap("input_load_u8", "offset %d is past the input of %d bytes", s[0], len(in)))
			}
			s[0] = uint64(in[s[0]])
		}},
		{"input_load_u64", i64s, i64s, func(ctx context.Context, st *callState, s []uint64) {
			in := st.extInput()
			if s[0] >= uint64(len(in)) {
				panic(extismTrap("input_load_u64", "offset %d is past the input of %d bytes", s[0], len(in)))
			}
			var b [8]byte // a last word that runs past the input reads zeros there
			copy(b[:], in[s[0]:])
			s[0] = le64(b[:])
		}},
		{"input_offset", nil, i64s, func(ctx context.Context, st *callState, s []uint64) {
			x := st.ext
			if !x.inArena {
				in := st.extInput()
				off := st.newBlock(ctx, in)
				x.inArena, x.inOff, x.inLen = off != 0, off, uint64(len(in))
			}
			s[0] = x.inOff
		}},
		{"input_set", i64x2, nil, func(ctx context.Context, st *callState, s []uint64) {
			x := st.ext
			x.span("input_set", s[0], s[1])
			x.inArena, x.inOff, x.inLen = true, s[0], s[1]
		}},
		{"output_set", i64x2, nil, func(ctx context.Context, st *callState, s []uint64) {
			x := st.ext
			if s[1] > 0 {
				x.span("output_set", s[0], s[1])
			}
			x.outOff, x.outLen, x.outSet = s[0], s[1], true
		}},
		{"output_length", nil, i64s, func(ctx context.Context, st *callState, s []uint64) { s[0] = st.ext.outLen }},
		{"output_offset", nil, i64s, func(ctx context.Context, st *callState, s []uint64) { s[0] = st.ext.outOff }},
		{"error_set", i64s, nil, func(ctx context.Context, st *callState, s []uint64) { st.ext.errOff = s[0] }},
		{"error_get", nil, i64s, func(ctx context.Context, st *callState, s []uint64) { s[0] = st.ext.errOff }},
	}
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func putLE64(b []byte, v uint64) {
	_ = b[7]
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

// extismEnvFuncs are the functions beyond the kernel: config, vars, logs.
func extismEnvFuncs() []extFn {
	fns := []extFn{
		{"config_get", i64s, i64s, func(ctx context.Context, st *callState, s []uint64) {
			key := st.ext.bytes("config_get", s[0])
			st.charge(ctx, copyCharge(len(key)))
			v, ok := "", false
			if len(key) < st.configKeyMax() {
				v, ok = st.pool.cfg.Config[string(key)]
			}
			if !ok {
				s[0] = 0
				return
			}
			s[0] = st.newBlock(ctx, []byte(v))
		}},
		{"var_get", i64s, i64s, func(ctx context.Context, st *callState, s []uint64) {
			x := st.ext
			key := x.bytes("var_get", s[0])
			st.charge(ctx, copyCharge(len(key)))
			v, ok := x.vars[string(key)]
			keyOff := s[0]
			s[0] = 0
			if ok {
				s[0] = st.newBlock(ctx, v) // before the key's block is freed: a fresh offset
			}
			x.free(keyOff)
		}},
		{"var_set", i64x2, nil, func(ctx context.Context, st *callState, s []uint64) {
			x := st.ext
			key := string(x.bytes("var_set", s[0]))
			st.charge(ctx, copyCharge(len(key)))
			x.free(s[0])
			if old, ok := x.vars[key]; ok {
				x.varBytes -= len(key) + len(old)
				delete(x.vars, key)
			}
			if s[1] == 0 {
				return
			}
			v := x.bytes("var_set", s[1])
			if x.varBytes+len(key)+len(v) > DefaultExtismVarBytes {
				panic(extismTrap("var_set", "the instance's vars would hold more than %d bytes", DefaultExtismVarBytes))
			}
			st.charge(ctx, copyCharge(len(v)))
			if x.vars == nil {
				x.vars = map[string][]byte{}
			}
			x.vars[key] = slices.Clone(v)
			x.varBytes += len(key) + len(v)
			x.free(s[1])
		}},
		{"get_log_level", nil, i32s, func(ctx context.Context, st *callState, s []uint64) {
			s[0] = uint64(extismLogLevel(ctx, st.pool.logger))
		}},
	}
	for i, lv := range extismLevels {
		name := "log_" + extismLevelNames[i]
		fns = append(fns, extFn{name, i64s, nil, func(ctx context.Context, st *callState, s []uint64) {
			b := st.ext.bytes(name, s[0])
			st.guestLog(ctx, lv, b)
			st.ext.free(s[0])
		}})
	}
	return fns
}

// Extism's log levels, in its order (get_log_level answers the index of the lowest one the
// host logs), as slog levels.
var (
	extismLevels     = [...]slog.Level{slog.LevelDebug - 4, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}
	extismLevelNames = [...]string{"trace", "debug", "info", "warn", "error"}
)

func extismLogLevel(ctx context.Context, l *slog.Logger) int32 {
	for i, lv := range extismLevels {
		if l.Enabled(ctx, lv) {
			return int32(i)
		}
	}
	return math.MaxInt32
}

// guestLog writes one of the guest's log lines under the caps wqhost/v1's log has: at most
// maxLogLine bytes a line, maxLogsPerCall lines and maxLogBytesPerCall bytes a call, the rest
// counted and reported once after the call.
func (st *callState) guestLog(ctx context.Context, lv slog.Level, b []byte) {
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
	st.pool.logger.Log(ctx, lv, strings.ToValidUTF8(string(b), "\uFFFD"), st.callee().logAttrs("source", "guest")...)
}

// extismModule builds the extism:host/env host module.
func extismModule(rt wazero.Runtime) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(extismModuleName)
	fns := append(append(extismKernelFuncs(), extismEnvFuncs()...), extismHTTPFuncs()...)
	for _, f := range fns {
		fn, name := f.fn, f.name
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, s []uint64) {
			fn(ctx, extState(ctx, name), s)
		}), f.params, f.results).WithName(name).Export(name)
	}
	return b
}
