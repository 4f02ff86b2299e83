package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wqhost/wqhost/internal/testcache"
)

// fakeHost implements the wqhost import module of docs/abi.md for one instance, so these tests
// check the committed modules against the ABI text without depending on runtime/.
type fakeHost struct {
	body     []byte
	meta     map[string]string
	config   map[string]string
	outputs  []output // every accepted emit and batch_emit, in call order
	errText  string
	retryMS  int64
	logs     []string
	emitCode int32 // returned by emit and batch_emit when not 0

	// The call's batch (docs/abi.md, "Batches"): in a wqhost_handle call its one message, in
	// a wqhost_handle_batch call the messages given to resetBatch, in a self test none.
	batch    []batchMsg
	verdicts map[int32]verdict
}

// output is one accepted emit (index -1: the call's own) or batch_emit (index: its message).
type output struct {
	index int32
	queue string
	body  []byte
}

// batchMsg is a message of the call's batch.
type batchMsg struct {
	body []byte
	meta map[string]string
}

// verdict is an accepted batch_verdict: status 0 ok, 1 retry, 2 reject.
type verdict struct {
	status  int32
	retryMS int64
	reason  string
}

// reset prepares a wqhost_handle call of one message, which is also the call's batch.
func (h *fakeHost) reset(body []byte, meta map[string]string) {
	h.body, h.meta, h.outputs, h.errText, h.retryMS, h.logs = body, meta, nil, "", 0, nil
	h.batch, h.verdicts = []batchMsg{{body: body, meta: meta}}, map[int32]verdict{}
}

// resetBatch prepares a wqhost_handle_batch call of msgs. As in such a call, msg_body is
// empty and msg_meta knows only the call's keys: tenant, binding and max_output_bytes.
func (h *fakeHost) resetBatch(msgs []batchMsg) {
	h.reset(nil, map[string]string{})
	for _, k := range []string{"tenant", "binding", "max_output_bytes"} {
		if v, ok := msgs[0].meta[k]; ok {
			h.meta[k] = v
		}
	}
	h.batch = msgs
}

// batchIndex reads a batch function's message index, or reports it outside the batch.
func (h *fakeHost) batchIndex(v uint64) (int32, bool) {
	i := api.DecodeI32(v)
	return i, i >= 0 && int(i) < len(h.batch)
}

// maxReason is how much of a reason the host keeps (docs/abi.md: at most 4 KiB).
const maxReason = 4096

const (
	errDenied  = -2
	errInvalid = -5
)

func read(m api.Module, fn string, ptr, n uint32) []byte {
	b, ok := m.Memory().Read(ptr, n)
	if !ok {
		panic(fmt.Sprintf("%s: (%d, %d) is outside guest memory", fn, ptr, n))
	}
	return b
}

// lookup implements msg_meta/config_get: copy min(buf_len, len) bytes, return the full length.
func lookup(m api.Module, fn string, values map[string]string, stack []uint64) {
	v, ok := values[string(read(m, fn, api.DecodeU32(stack[0]), api.DecodeU32(stack[1])))]
	if !ok {
		stack[0] = api.EncodeI32(-1)
		return
	}
	n := min(int(api.DecodeU32(stack[3])), len(v))
	if n > 0 && !m.Memory().Write(api.DecodeU32(stack[2]), []byte(v[:n])) {
		panic(fn + ": buffer outside guest memory")
	}
	stack[0] = api.EncodeI32(int32(len(v)))
}

func (h *fakeHost) instantiate(ctx context.Context, t testing.TB, r wazero.Runtime) {
	t.Helper()
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	b := r.NewHostModuleBuilder("wqhost")
	fn := func(name string, params, results []api.ValueType, f api.GoModuleFunc) {
		b.NewFunctionBuilder().WithGoModuleFunction(f, params, results).Export(name)
	}
	fn("msg_body_len", nil, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) {
		s[0] = api.EncodeI32(int32(len(h.body)))
	})
	fn("msg_body", []api.ValueType{i32, i32}, []api.ValueType{i32}, func(_ context.Context, m api.Module, s []uint64) {
		n := min(int(api.DecodeU32(s[1])), len(h.body))
		if !m.Memory().Write(api.DecodeU32(s[0]), h.body[:n]) {
			panic("msg_body: buffer outside guest memory")
		}
		s[0] = api.EncodeI32(int32(n))
	})
	fn("msg_meta", []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, func(_ context.Context, m api.Module, s []uint64) {
		lookup(m, "msg_meta", h.meta, s)
	})
	fn("config_get", []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, func(_ context.Context, m api.Module, s []uint64) {
		lookup(m, "config_get", h.config, s)
	})
	fn("log", []api.ValueType{i32, i32, i32}, nil, func(_ context.Context, m api.Module, s []uint64) {
		h.logs = append(h.logs, fmt.Sprintf("%d %s", api.DecodeI32(s[0]), read(m, "log", api.DecodeU32(s[1]), api.DecodeU32(s[2]))))
	})
	fn("set_error", []api.ValueType{i32, i32}, nil, func(_ context.Context, m api.Module, s []uint64) {
		h.errText = string(read(m, "set_error", api.DecodeU32(s[0]), api.DecodeU32(s[1])))
	})
	fn("retry_after", []api.ValueType{i64}, nil, func(_ context.Context, _ api.Module, s []uint64) {
		h.retryMS = int64(s[0])
	})
	fn("emit", []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}, func(_ context.Context, m api.Module, s []uint64) {
		q := string(read(m, "emit", api.DecodeU32(s[0]), api.DecodeU32(s[1])))
		body := bytes.Clone(read(m, "emit", api.DecodeU32(s[2]), api.DecodeU32(s[3])))
		if h.emitCode != 0 {
			s[0] = api.EncodeI32(h.emitCode)
			return
		}
		h.outputs = append(h.outputs, output{index: -1, queue: q, body: body})
		s[0] = 0
	})
	fn("batch_size", nil, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) {
		s[0] = api.EncodeI32(int32(len(h.batch)))
	})
	fn("batch_body_len", []api.ValueType{i32}, []api.ValueType{i32}, func(_ context.Context, _ api.Module, s []uint64) {
		i, ok := h.batchIndex(s[0])
		if !ok {
			s[0] = api.EncodeI32(errInvalid)
			return
		}
		s[0] = api.EncodeI32(int32(len(h.batch[i].body)))
	})
	fn("batch_body", []api.ValueType{i32, i32, i32}, []api.ValueType{i32}, func(_ context.Context, m api.Module, s []uint64) {
		i, ok := h.batchIndex(s[0])
		if !ok {
			s[0] = api.EncodeI32(errInvalid)
			return
		}
		n := min(int(api.DecodeU32(s[2])), len(h.batch[i].body))
		if !m.Memory().Write(api.DecodeU32(s[1]), h.batch[i].body[:n]) {
			panic("batch_body: buffer outside guest memory")
		}
		s[0] = api.EncodeI32(int32(n))
	})
	fn("batch_meta", []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}, func(_ context.Context, m api.Module, s []uint64) {
		i, ok := h.batchIndex(s[0])
		if !ok {
			s[0] = api.EncodeI32(errInvalid)
			return
		}
		rest := s[1:]
		lookup(m, "batch_meta", h.batch[i].meta, rest)
		s[0] = rest[0]
	})
	fn("batch_emit", []api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}, func(_ context.Context, m api.Module, s []uint64) {
		q := string(read(m, "batch_emit", api.DecodeU32(s[1]), api.DecodeU32(s[2])))
		body := bytes.Clone(read(m, "batch_emit", api.DecodeU32(s[3]), api.DecodeU32(s[4])))
		i, ok := h.batchIndex(s[0])
		switch _, decided := h.verdicts[i]; {
		case !ok:
			s[0] = api.EncodeI32(errInvalid)
		case decided: // a message with a verdict takes no more outputs
			s[0] = api.EncodeI32(errDenied)
		case h.emitCode != 0:
			s[0] = api.EncodeI32(h.emitCode)
		default:
			h.outputs = append(h.outputs, output{index: i, queue: q, body: body})
			s[0] = 0
		}
	})
	fn("batch_verdict", []api.ValueType{i32, i32, i64, i32, i32}, []api.ValueType{i32}, func(_ context.Context, m api.Module, s []uint64) {
		reason := string(read(m, "batch_verdict", api.DecodeU32(s[3]), api.DecodeU32(s[4])))
		i, ok := h.batchIndex(s[0])
		status, ms := api.DecodeI32(s[1]), int64(s[2])
		switch _, decided := h.verdicts[i]; {
		case !ok || status < 0 || status > 2:
			s[0] = api.EncodeI32(errInvalid)
		case decided: // the first verdict is final
			s[0] = api.EncodeI32(errDenied)
		default:
			if len(reason) > maxReason {
				reason = reason[:maxReason]
			}
			h.verdicts[i] = verdict{status: status, retryMS: max(ms, 0), reason: reason}
			s[0] = 0
		}
	})
	if _, err := b.Instantiate(ctx); err != nil {
		t.Fatalf("instantiate fake wqhost module: %v", err)
	}
}

// ending is how one message of a call ends, and the outputs sent for it.
type ending struct {
	status  int32 // 0 ok, 1 retry, 2 reject, -1 failed (unknown status)
	retryMS int64
	reason  string
	outputs []string // "queue:body" of the outputs tied to the message, when it ends ok
}

// endBatch settles a wqhost_handle_batch call that returned status, by docs/abi.md: each
// message by its verdict or else by the status (with set_error's reason and retry_after's
// delay), its own outputs only if it ends ok; the call's outputs (emit) only if the status
// is 0. It returns the endings by index and the call's outputs as "queue:body".
func (h *fakeHost) endBatch(status int32) ([]ending, []string) {
	ends := make([]ending, len(h.batch))
	for i := range ends {
		e := ending{status: status, reason: h.errText}
		switch v, ok := h.verdicts[int32(i)]; {
		case ok:
			e = ending{status: v.status, retryMS: v.retryMS, reason: v.reason}
		case status == 1:
			e.retryMS = h.retryMS
		case status < 0 || status > 2:
			e.status = -1
		}
		if e.status == 0 {
			e.outputs = h.sent(int32(i))
		}
		ends[i] = e
	}
	var call []string
	if status == 0 {
		call = h.sent(-1)
	}
	return ends, call
}

// endSingle settles a wqhost_handle call: a verdict for message 0 replaces the returned
// status, and every output, emit's and batch_emit(0)'s, is sent only if the result is ok.
func (h *fakeHost) endSingle(status int32) ending {
	e := ending{status: status, reason: h.errText}
	if status == 1 {
		e.retryMS = h.retryMS
	}
	if v, ok := h.verdicts[0]; ok {
		e = ending{status: v.status, retryMS: v.retryMS, reason: v.reason}
	}
	if e.status == 0 {
		for _, o := range h.outputs {
			e.outputs = append(e.outputs, o.queue+":"+string(o.body))
		}
	}
	return e
}

// sent lists the outputs tied to index (-1: the call's) as "queue:body".
func (h *fakeHost) sent(index int32) []string {
	var out []string
	for _, o := range h.outputs {
		if o.index == index {
			out = append(out, o.queue+":"+string(o.body))
		}
	}
	return out
}

// reactor loads a committed wqhost/v1 module the way the host does: WASI, the wqhost module,
// then _initialize if exported.
func reactor(t testing.TB, name string) (*fakeHost, api.Module) {
	t.Helper()
	ctx := context.Background()
	wasm, err := os.ReadFile(filepath.Join(name, name+".wasm"))
	if err != nil {
		t.Fatalf("read committed module: %v", err)
	}
	r := newRuntime(ctx, t)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	h := &fakeHost{}
	h.instantiate(ctx, t, r)
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	exports := cm.ExportedFunctions()
	if _, ok := exports["wqhost_abi_v1"]; !ok {
		t.Fatalf("%s does not export wqhost_abi_v1", name)
	}
	// Every SDK-built module has both handle functions, so it runs on a binding with or
	// without batch:.
	for _, want := range []string{"wqhost_handle", "wqhost_handle_batch"} {
		def, ok := exports[want]
		if !ok {
			t.Fatalf("%s does not export %s", name, want)
		}
		if len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 1 || def.ResultTypes()[0] != api.ValueTypeI32 {
			t.Fatalf("%s exports %s with params %v results %v, want () -> i32", name, want, def.ParamTypes(), def.ResultTypes())
		}
	}
	if _, ok := exports["_start"]; ok {
		t.Fatalf("%s exports _start: a reactor must not", name)
	}
	cfg := wazero.NewModuleConfig().WithName(name).WithStartFunctions()
	if _, ok := exports["_initialize"]; ok {
		cfg = cfg.WithStartFunctions("_initialize")
	}
	mod, err := r.InstantiateModule(ctx, cm, cfg)
	if err != nil {
		t.Fatalf("instantiate %s: %v", name, err)
	}
	return h, mod
}

// newRuntime returns a runtime, closed when the test ends, that keeps compiled modules in the
// test compilation cache: compiling the 2 MB Go-built modules under -race takes tens of seconds.
// It closes modules when a call's context is done, as the host's runtimes do: wazero keys
// compiled code by that setting too, so the host and CLI tests of the same run reuse these
// compilations of the committed modules.
func newRuntime(ctx context.Context, t testing.TB) wazero.Runtime {
	t.Helper()
	cache, err := wazero.NewCompilationCacheWithDir(testcache.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(true))
	t.Cleanup(func() {
		r.Close(ctx)
		cache.Close(ctx)
	})
	return r
}

func call(t testing.TB, mod api.Module, fn string) int32 {
	t.Helper()
	res, err := mod.ExportedFunction(fn).Call(context.Background())
	if err != nil {
		t.Fatalf("call %s: %v", fn, err)
	}
	return api.DecodeI32(res[0])
}
