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
// only through the load/store host functions, never by pointer, so here the kernel is a
// memory per instance on the Go side (extism_kernel.go: a mapping reserved at the limit,
// reserving from the tenant's memory budget as it grows): a block's handle is its offset,
// blocks are allocated by bumping a pointer (a freed block is reused first-fit from the
// lowest free one, split and merged; the last one given back at once), and the memory is
// emptied before each call. Every function is charged like the wqhost/v1 ones (charge.go),
// and every offset is checked against the memory: a bad one traps the call naming the
// function, as a bad pointer does for a wqhost/v1 guest.

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
	// extismKeepBytes is the most kernel memory an idle instance keeps for its next call.
	extismKeepBytes = 1 << 20
	// extismBlockRecord is what a block's record costs (extism_kernel.go): it takes that
	// much of the kernel memory, within the limit.
	extismBlockRecord = 12
	// extismReuseScan is how many blocks alloc looks through for a freed one.
	extismReuseScan = 64
	// extismSplitBytes is the least a reused block must have left over to be split, its
	// rest a free block of its own.
	extismSplitBytes = 64
	// extismUserHeader names the credential (PoolConfig.HTTP.Credentials) an Extism guest's
	// request asks for; the host removes it before sending.
	extismUserHeader = "Wqhost-Credential"
)

// extismState is one instance's Extism kernel: its memory blocks (extism_kernel.go), the
// current call's input, output and error, and its vars, which live as long as the instance
// (Extism's semantics).
type extismState struct {
	k     *kernelMemory
	freed int // blocks marked free
	hint  int // no block below this index is free

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

// newExtismState makes an instance's kernel of up to limit bytes (at most 2 GiB: offsets are
// 32-bit in its records), mapped where g allows, reserving from budget as it grows.
func newExtismState(g *guestMemories, limit uint64, budget *memBudget, what string) *extismState {
	return &extismState{k: newKernelMemory(g, int(min(limit, math.MaxInt32)), budget, what)}
}

// begin empties the kernel for a call: every block, the output, the error and the last
// response go; the vars stay.
func (x *extismState) begin() {
	x.reset()
	x.inArena, x.inOff, x.inLen = false, 0, 0
	x.httpStatus, x.httpHeaders = 0, nil
}

// reset is the kernel's reset: every block freed, the output and error forgotten, the pages
// past extismKeepBytes given back.
func (x *extismState) reset() {
	x.k.top, x.k.n = extismBase, 0
	x.k.shrink(extismKeepBytes)
	x.freed, x.hint = 0, 0
	x.outOff, x.outLen, x.outSet, x.errOff = 0, 0, false, 0
	if x.inArena {
		x.inArena, x.inOff, x.inLen = false, 0, 0
	}
}

func extismTrap(fn, format string, args ...any) *HostCallError {
	return &HostCallError{Func: extismModuleName + "." + fn, Msg: fmt.Sprintf(format, args...)}
}

// extAlloc is the kernel's alloc: a zeroed block of n bytes (0 for n == 0), its work charged.
// A block past the limit, or one the tenant's memory budget refuses, traps the call.
func (st *callState) extAlloc(ctx context.Context, n uint64) uint64 {
	x := st.ext
	k := x.k
	st.charge(ctx, callCharge)
	if n == 0 {
		return 0
	}
	if n > uint64(k.limit) {
		panic(extismTrap("alloc", "a block of %d bytes would take the instance's kernel memory past its limit of %d bytes", n, k.limit))
	}
	// The zeroing's charge, whether or not the pages are already zeros: a block the
	// guest then fills costs the kernel that much anyway.
	st.charge(ctx, copyCharge(int(n)))
	if off := st.extReuse(ctx, int(n)); off != 0 {
		return off
	}
	off := (k.top + 7) &^ 7
	end := off + int(n)
	if end+(k.n+1)*extismBlockRecord > k.limit {
		panic(extismTrap("alloc", "a block of %d bytes would take the instance's kernel memory past its limit of %d bytes", n, k.limit))
	}
	st.extGrow(ctx, end, k.n+1)
	k.clean(ctx, st, off, end)
	k.n++
	k.set(k.n-1, off, int(n), false)
	k.top = end
	k.mark(end)
	return uint64(off)
}

// extGrow makes room for blocks up to end and n records, or traps alloc naming the budget
// that refused.
func (st *callState) extGrow(ctx context.Context, end, n int) {
	if err := st.ext.k.grow(ctx, st, end, n); err != nil {
		panic(&HostCallError{Func: extismModuleName + ".alloc", Msg: "kernel memory refused", Err: err})
	}
}

// extReuse reuses the first freed block of n bytes or more, looking through at most
// extismReuseScan blocks from the lowest one that may be free (a scan of every block would be
// work the guest could make grow without bound between two checks of the time limit). A
// block far larger than n is split, its rest a free block. 0: none.
func (st *callState) extReuse(ctx context.Context, n int) uint64 {
	x := st.ext
	k := x.k
	if x.freed == 0 {
		return 0
	}
	end := min(k.n, x.hint+extismReuseScan)
	for i := x.hint; i < end; i++ {
		if !k.isFree(i) {
			if i == x.hint {
				x.hint++
			}
			continue
		}
		ext := k.extent(i)
		if ext < n {
			continue
		}
		off := k.off(i)
		k.set(i, off, n, false)
		x.freed--
		if rest := (n + 7) &^ 7; ext-rest >= extismSplitBytes && k.top+(k.n+1)*extismBlockRecord <= k.limit {
			st.extGrow(ctx, k.top, k.n+1)
			st.charge(ctx, copyCharge(k.moveRecords(i+1, i+2)))
			k.n++
			k.set(i+1, off+rest, 0, true)
			k.mark(k.top)
			x.freed++
		}
		st.zero(ctx, k.buf[off:off+n])
		return uint64(off)
	}
	st.charge(ctx, end-x.hint)
	return 0
}

// zero clears b a piece at a time, charging each piece.
func (st *callState) zero(ctx context.Context, b []byte) {
	for off := 0; off < len(b); off += pieceBytes {
		end := min(off+pieceBytes, len(b))
		st.charge(ctx, copyCharge(end-off))
		clear(b[off:end])
	}
}

// extFree frees the block at off: merged with free neighbours, and given back at once with
// the free blocks below it when it is the last.
func (st *callState) extFree(ctx context.Context, off uint64) {
	x := st.ext
	k := x.k
	i := k.find(off)
	if i < 0 || k.isFree(i) {
		return
	}
	if i == k.n-1 {
		k.n--
		for k.n > 0 && k.isFree(k.n-1) {
			k.n--
			x.freed--
		}
		k.top = extismBase
		if k.n > 0 {
			k.top = k.off(k.n-1) + k.size(k.n-1)
		}
		x.hint = min(x.hint, k.n)
		if k.dirty-pageUp(k.top) >= kernelDropBytes || k.recsHW-k.n*extismBlockRecord >= kernelDropBytes {
			k.shrink(extismKeepBytes)
		}
		return
	}
	k.setFree(i, true)
	x.freed++
	if k.isFree(i + 1) {
		st.charge(ctx, copyCharge(k.moveRecords(i+2, i+1)))
		k.n--
		x.freed--
	}
	if i > 0 && k.isFree(i-1) {
		st.charge(ctx, copyCharge(k.moveRecords(i+1, i)))
		k.n--
		x.freed--
		i--
	}
	x.hint = min(x.hint, i)
}

// block is the live block at off, if there is one.
func (x *extismState) block(off uint64) ([]byte, bool) {
	i := x.k.find(off)
	if i < 0 || x.k.isFree(i) {
		return nil, false
	}
	return x.k.buf[off : off+uint64(x.k.size(i))], true
}

// length is the size of the live block at off, 0 when there is none.
func (x *extismState) length(off uint64) uint64 {
	b, _ := x.block(off)
	return uint64(len(b))
}

// bytes is the live block at off, or traps naming fn; off 0 is the empty block.
func (x *extismState) bytes(fn string, off uint64) []byte {
	if off == 0 {
		return nil
	}
	b, ok := x.block(off)
	if !ok {
		panic(extismTrap(fn, "%d is not the offset of a memory block", off))
	}
	return b
}

// span returns the kernel memory's bytes [off, off+n) or traps naming fn.
func (x *extismState) span(fn string, off, n uint64) []byte {
	top := uint64(x.k.top)
	if off < extismBase || n > top || off > top-n {
		panic(extismTrap(fn, "range [%d, %d+%d) is outside the kernel memory of %d bytes", off, off, n, top))
	}
	return x.k.buf[off : off+n]
}

// extInput is the call's input as it stands: the message body, or the block input_set or
// input_offset made of it.
func (st *callState) extInput() []byte {
	x := st.ext
	if x.inArena {
		return x.k.buf[x.inOff : x.inOff+x.inLen]
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
		st.copyOut(ctx, st.ext.k.buf[off:off+uint64(len(b))], b)
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
		{"free", i64s, nil, func(ctx context.Context, st *callState, s []uint64) { st.extFree(ctx, s[0]) }},
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
		{"memory_bytes", nil, i64s, func(ctx context.Context, st *callState, s []uint64) { s[0] = uint64(st.ext.k.top) }},
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
			st.extFree(ctx, keyOff)
		}},
		{"var_set", i64x2, nil, func(ctx context.Context, st *callState, s []uint64) {
			x := st.ext
			key := string(x.bytes("var_set", s[0]))
			st.charge(ctx, copyCharge(len(key)))
			st.extFree(ctx, s[0])
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
			st.extFree(ctx, s[1])
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
			st.extFree(ctx, s[0])
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
