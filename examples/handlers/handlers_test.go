package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
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
// empty and msg_meta knows only tenant and binding.
func (h *fakeHost) resetBatch(msgs []batchMsg) {
	h.reset(nil, map[string]string{})
	for _, k := range []string{"tenant", "binding"} {
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

func TestEchoReactors(t *testing.T) {
	for _, name := range []string{"echo-go", "echo-tinygo", "echo-rust"} {
		t.Run(name, func(t *testing.T) {
			h, mod := reactor(t, name)
			if got := call(t, mod, "wqhost_self_test"); got != 0 {
				t.Fatalf("self test = %d, want 0", got)
			}
			// Several messages of different sizes through one instance: the SDK reuses its
			// body buffer, so a shorter message after a longer one must not leak bytes.
			for _, body := range []string{"hello, queue", strings.Repeat("x", 70000), "", "short"} {
				h.reset([]byte(body), nil)
				if got := call(t, mod, "wqhost_handle"); got != 0 {
					t.Fatalf("body len %d: status %d (error %q), want 0", len(body), got, h.errText)
				}
				if len(h.outputs) != 1 || h.outputs[0].queue != "" || string(h.outputs[0].body) != body {
					t.Fatalf("body len %d: outputs %d, want one identical body to the output queue", len(body), len(h.outputs))
				}
			}
			h.reset([]byte("x"), nil)
			h.emitCode = -3
			if got := call(t, mod, "wqhost_handle"); got != 1 {
				t.Fatalf("emit too large: status %d, want 1 (retry)", got)
			}
			if !strings.Contains(h.errText, "too large") {
				t.Fatalf("emit too large: error text %q does not say so", h.errText)
			}
		})
	}
}

// TestBilling runs the same source built by Go and by TinyGo.
func TestBilling(t *testing.T) {
	for _, name := range []string{"billing-go", "billing-tinygo"} {
		t.Run(name, func(t *testing.T) { testBilling(t, name) })
	}
}

func testBilling(t *testing.T, name string) {
	h, mod := reactor(t, name)
	h.config = map[string]string{"tax_rate": "0.2"}
	if got := call(t, mod, "wqhost_self_test"); got != 0 {
		t.Fatalf("self test = %d (logs %q), want 0", got, h.logs)
	}
	tests := []struct {
		name       string
		body       string
		config     map[string]string
		wantStatus int32
		wantOut    map[string]any
		wantErr    string
	}{
		{
			name:       "items priced with tax",
			body:       `{"id":"tx-1","account":"acme","currency":"EUR","items":[{"sku":"a","quantity":3,"unit_price":2.5},{"sku":"b","quantity":1,"unit_price":0.1}]}`,
			config:     map[string]string{"tax_rate": "0.2"},
			wantStatus: 0,
			wantOut:    map[string]any{"id": "tx-1", "account": "acme", "currency": "EUR", "items": 2.0, "subtotal_cents": 760.0, "tax_rate": 0.2, "tax_cents": 152.0, "total_cents": 912.0},
		},
		{
			name:       "amount without items, no tax configured",
			body:       `{"id":"tx-2","account":"acme","currency":"USD","amount":19.99}`,
			wantStatus: 0,
			wantOut:    map[string]any{"id": "tx-2", "account": "acme", "currency": "USD", "items": 0.0, "subtotal_cents": 1999.0, "tax_rate": 0.0, "tax_cents": 0.0, "total_cents": 1999.0},
		},
		{name: "malformed JSON is rejected", body: `{"id":`, wantStatus: 2, wantErr: "malformed transaction JSON"},
		{name: "missing fields are rejected", body: `{"id":"tx-3","items":[]}`, wantStatus: 2, wantErr: `transaction "tx-3" lacks account, currency, items or amount`},
		{name: "bad quantity is rejected", body: `{"id":"tx-4","account":"a","currency":"EUR","items":[{"sku":"z","quantity":0,"unit_price":1}]}`, wantStatus: 2, wantErr: `item 0 ("z")`},
		{name: "bad tax_rate config is retried", body: `{"id":"tx-5","account":"a","currency":"EUR","amount":1}`, config: map[string]string{"tax_rate": "lots"}, wantStatus: 1, wantErr: `config tax_rate "lots"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.config = tc.config
			h.reset([]byte(tc.body), nil)
			got := call(t, mod, "wqhost_handle")
			if got != tc.wantStatus {
				t.Fatalf("status %d (error %q), want %d", got, h.errText, tc.wantStatus)
			}
			if tc.wantErr != "" && !strings.Contains(h.errText, tc.wantErr) {
				t.Fatalf("error text %q, want it to contain %q", h.errText, tc.wantErr)
			}
			if tc.wantOut == nil {
				return
			}
			if len(h.outputs) != 1 {
				t.Fatalf("%d outputs, want 1", len(h.outputs))
			}
			var out map[string]any
			if err := json.Unmarshal(h.outputs[0].body, &out); err != nil {
				t.Fatalf("output %q is not JSON: %v", h.outputs[0].body, err)
			}
			if fmt.Sprint(out) != fmt.Sprint(tc.wantOut) {
				t.Fatalf("output %v, want %v", out, tc.wantOut)
			}
		})
	}
}

// TestCountVowels checks the Extism-compatible output of every build of count-vowels.
func TestCountVowels(t *testing.T) {
	for _, name := range []string{"count-vowels-go", "count-vowels-tinygo", "count-vowels-rust"} {
		t.Run(name, func(t *testing.T) {
			h, mod := reactor(t, name)
			for _, tc := range []struct{ body, want string }{
				{"Hello, World!", `{"count":3,"total":3,"vowels":"aeiouAEIOU"}`},
				{"", `{"count":0,"total":3,"vowels":"aeiouAEIOU"}`},
			} {
				h.reset([]byte(tc.body), nil)
				if got := call(t, mod, "wqhost_handle"); got != 0 {
					t.Fatalf("body %q: status %d (error %q), want 0", tc.body, got, h.errText)
				}
				if len(h.outputs) != 1 || string(h.outputs[0].body) != tc.want {
					t.Fatalf("body %q: outputs %+v, want one %s", tc.body, h.outputs, tc.want)
				}
			}
		})
	}
}

// TestNoopReactors: the noop builds accept a message and emit nothing.
func TestNoopReactors(t *testing.T) {
	for _, name := range []string{"noop-go", "noop-tinygo"} {
		t.Run(name, func(t *testing.T) {
			h, mod := reactor(t, name)
			h.reset([]byte("anything"), nil)
			if got := call(t, mod, "wqhost_handle"); got != 0 || len(h.outputs) != 0 {
				t.Fatalf("status %d, %d outputs (error %q), want 0 and none", got, len(h.outputs), h.errText)
			}
		})
	}
}

func TestUpperStdio(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile("upper-stdio/upper-stdio.wasm")
	if err != nil {
		t.Fatalf("read committed module: %v", err)
	}
	r := newRuntime(ctx, t)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatalf("compile upper-stdio: %v", err)
	}
	tests := []struct {
		in       string
		wantOut  string
		wantExit uint32
	}{
		{in: "hello, Queue 1\n", wantOut: "HELLO, QUEUE 1\n"},
		{in: " \n", wantExit: 65},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		cfg := wazero.NewModuleConfig().WithName("").WithStdin(strings.NewReader(tc.in)).WithStdout(&stdout).WithStderr(&stderr)
		_, err := r.InstantiateModule(ctx, cm, cfg)
		var exit uint32
		var ee *sys.ExitError
		if errors.As(err, &ee) {
			exit = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("input %q: %v", tc.in, err)
		}
		if exit != tc.wantExit || stdout.String() != tc.wantOut {
			t.Fatalf("input %q: exit %d stdout %q (stderr %q), want exit %d stdout %q", tc.in, exit, stdout.String(), stderr.String(), tc.wantExit, tc.wantOut)
		}
	}
}

// BenchmarkEchoHandle measures one wqhost_handle call on a warm instance (fake host included),
// to compare the Go and Rust SDKs' per-message cost within one run.
func BenchmarkEchoHandle(b *testing.B) {
	for _, name := range []string{"echo-go", "echo-tinygo", "echo-rust"} {
		b.Run(name, func(b *testing.B) {
			h, mod := reactor(b, name)
			h.reset([]byte(strings.Repeat("m", 256)), nil)
			fn := mod.ExportedFunction("wqhost_handle")
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				h.outputs = h.outputs[:0]
				if _, err := fn.Call(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestReadmeConfig loads the host config README.md shows, as a user pasting it into a config
// at the repository root would.
func TestReadmeConfig(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "Bindings using them")
	if !ok {
		t.Fatal(`README.md lost its "Bindings using them" section`)
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	snippet, _, ok := strings.Cut(rest, "```")
	if !ok || snippet == "" {
		t.Fatal("README.md: no yaml block after \"Bindings using them\"")
	}
	cfg, err := config.Parse([]byte(snippet), filepath.Join("..", ".."), source.Check)
	if err != nil {
		t.Fatalf("README.md's config is rejected: %v\n%s", err, snippet)
	}
	if b := cfg.Tenants["default"].Bindings; len(b) != 2 || b["billing"].Config["tax_rate"] != "0.2" || b["upper"].ABI != "wasi-stdio" {
		t.Fatalf("README.md's config loaded as %+v", b)
	}
}

// msgs makes a batch of bodies with ids m0, m1, ... and the tenant and binding.
func msgs(bodies ...string) []batchMsg {
	out := make([]batchMsg, len(bodies))
	for i, b := range bodies {
		out[i] = batchMsg{body: []byte(b), meta: map[string]string{
			"id": fmt.Sprintf("m%d", i), "tenant": "t1", "binding": "sink", "dequeue_count": "1",
		}}
	}
	return out
}

var bulkSinks = []string{"bulk-sink-go", "bulk-sink-tinygo", "bulk-sink-rust"}

// bulkSink loads a bulk-sink build with the given binding config (read once per instance, so
// each config gets its own instance).
func bulkSink(t *testing.T, name string, config map[string]string) (*fakeHost, api.Module) {
	t.Helper()
	h, mod := reactor(t, name)
	h.config = config
	if got := call(t, mod, "wqhost_self_test"); got != 0 {
		t.Fatalf("self test = %d, want 0", got)
	}
	return h, mod
}

// TestBulkSinkBatch: the objects of a batch go out as one array, the call's output; the other
// messages are rejected with a reason naming their id; the rest end ok by the call's status.
func TestBulkSinkBatch(t *testing.T) {
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, nil)
			h.resetBatch(msgs(`{"a":1}`, `not json`, " {\"b\":[1,2]}\n", `[{"x":1}]`, `{"c":"\u00e9"}`, `{"d":`, "{\"e\":\"\xff\"}", ``))
			status := call(t, mod, "wqhost_handle_batch")
			ends, out := h.endBatch(status)
			if status != 0 {
				t.Fatalf("status %d (error %q), want 0", status, h.errText)
			}
			if want := []string{`:[{"a":1},{"b":[1,2]},{"c":"\u00e9"}]`}; !slices.Equal(out, want) {
				t.Fatalf("call outputs %q, want %q", out, want)
			}
			rejected := map[int]string{
				1: "message m1: the body is not valid JSON",
				3: "message m3: the body is JSON but not an object",
				5: "message m5: the body is not valid JSON",
				6: "message m6: the body is not valid JSON (not UTF-8)",
				7: "message m7: the body is not valid JSON",
			}
			for i, e := range ends {
				if want, bad := rejected[i]; bad {
					if e.status != 2 || e.reason != "bulk-sink: "+want {
						t.Errorf("message %d ends %+v, want rejected with %q", i, e, want)
					}
				} else if e.status != 0 || len(e.outputs) != 0 {
					t.Errorf("message %d ends %+v, want ok without outputs of its own", i, e)
				}
			}
		})
	}
}

// TestBulkSinkSplits: arrays never exceed max_output_bytes; an object that cannot fit an
// array of its own is rejected.
func TestBulkSinkSplits(t *testing.T) {
	obj := func(n int) string { return `{"s":"` + strings.Repeat("x", n-8) + `"}` } // n bytes
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, map[string]string{"max_output_bytes": "23"})
			h.resetBatch(msgs(obj(10), obj(10), obj(10), obj(22), obj(21), obj(9), obj(9)))
			status := call(t, mod, "wqhost_handle_batch")
			ends, out := h.endBatch(status)
			want := []string{
				":[" + obj(10) + "," + obj(10) + "]", // 23 bytes: exactly the limit
				":[" + obj(10) + "]",
				":[" + obj(21) + "]",
				":[" + obj(9) + "," + obj(9) + "]",
			}
			if status != 0 || !slices.Equal(out, want) {
				t.Fatalf("status %d (error %q), call outputs %q, want 0 and %q", status, h.errText, out, want)
			}
			for i, e := range ends {
				if i == 3 {
					if e.status != 2 || !strings.Contains(e.reason, "message m3: a JSON object of 22 bytes does not fit an array of max_output_bytes 23") {
						t.Errorf("message 3 ends %+v, want rejected as too large", e)
					}
				} else if e.status != 0 {
					t.Errorf("message %d ends %+v, want ok", i, e)
				}
			}

			// A large batch with the default limit: every array within 60000 bytes, and
			// together they hold every object in order.
			h, mod = bulkSink(t, name, nil)
			var bodies []string
			for i := range 40 {
				bodies = append(bodies, fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("p", 5000)))
			}
			h.resetBatch(msgs(bodies...))
			status = call(t, mod, "wqhost_handle_batch")
			_, out = h.endBatch(status)
			var all []string
			for _, o := range out {
				array := strings.TrimPrefix(o, ":")
				if len(array) > 60000 {
					t.Errorf("array of %d bytes, over the default 60000", len(array))
				}
				var objs []json.RawMessage
				if err := json.Unmarshal([]byte(array), &objs); err != nil {
					t.Fatalf("output is not a JSON array: %v", err)
				}
				for _, o := range objs {
					all = append(all, string(o))
				}
			}
			if status != 0 || len(out) != 4 || !slices.Equal(all, bodies) {
				t.Fatalf("status %d, %d arrays holding %d objects; want 0, 4 arrays of all 40 in order", status, len(out), len(all))
			}
		})
	}
}

// TestBulkSinkSingle: on a binding without batch: (wqhost_handle) the batch handler gets a
// batch of one: an array of one, or a reject by the message's verdict.
func TestBulkSinkSingle(t *testing.T) {
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, nil)
			meta := map[string]string{"id": "solo", "tenant": "t1", "binding": "sink"}
			h.reset([]byte(`{"k":"v"}`), meta)
			if e := h.endSingle(call(t, mod, "wqhost_handle")); e.status != 0 || !slices.Equal(e.outputs, []string{`:[{"k":"v"}]`}) {
				t.Fatalf("object: %+v, want ok with one array of one", e)
			}
			h.reset([]byte(`{"k":`), meta)
			if e := h.endSingle(call(t, mod, "wqhost_handle")); e.status != 2 || e.reason != "bulk-sink: message solo: the body is not valid JSON" || len(e.outputs) != 0 {
				t.Fatalf("bad JSON: %+v, want rejected naming the message", e)
			}
		})
	}
}

// TestBulkSinkFailures: a failed emit retries every message not rejected (and sends nothing);
// a bad max_output_bytes retries the batch rather than poisoning it.
func TestBulkSinkFailures(t *testing.T) {
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, nil)
			h.resetBatch(msgs(`{"a":1}`, `x`))
			h.emitCode = -3
			status := call(t, mod, "wqhost_handle_batch")
			ends, out := h.endBatch(status)
			if status != 1 || len(out) != 0 || ends[0].status != 1 || !strings.Contains(ends[0].reason, "too large") || ends[1].status != 2 {
				t.Fatalf("emit too large: status %d, outputs %q, endings %+v; want retry naming it, the bad one rejected", status, out, ends)
			}

			h, mod = bulkSink(t, name, map[string]string{"max_output_bytes": "lots"})
			h.resetBatch(msgs(`{"a":1}`))
			status = call(t, mod, "wqhost_handle_batch")
			if ends, _ := h.endBatch(status); status != 1 || !strings.Contains(ends[0].reason, `max_output_bytes "lots"`) {
				t.Fatalf("bad config: status %d, endings %+v; want retry naming the config", status, ends)
			}
		})
	}
}

// TestBulkSinkBuildsAgree: the Rust build's own JSON check accepts exactly what the Go
// builds' encoding/json (json.Valid and UTF-8) does, on bodies at the edges of the grammar.
func TestBulkSinkBuildsAgree(t *testing.T) {
	var bodies []string
	for _, v := range []string{
		`0`, `-0`, `-0.5e+7`, `1E9`, `01`, `1.`, `.5`, `+1`, `1e`, `-`, `true`, `tru`, `nul`, `null`,
		`""`, `"\u00e9"`, `"\u00G9"`, `"\x"`, `"\/"`, "\"\x01\"", "\"\x7f\"", "\"é😀\"", "\"\xc3\"",
		`[]`, `[1,]`, `[,1]`, `{}`, `{"a":}`, `{"a":1,}`, `{"a" : [ 1 , {} ] }`, `[1]]`, "\ufeff{}",
	} {
		bodies = append(bodies, v, `{"v":`+v+`}`)
	}
	bodies = append(bodies, strings.Repeat("[", 10000)+strings.Repeat("]", 10000), `{"a":`+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+`}`)
	var want []int32
	for i, b := range bodies {
		trimmed := strings.TrimLeft(b, " \t\r\n")
		if !json.Valid([]byte(b)) || !utf8.ValidString(b) || !strings.HasPrefix(trimmed, "{") {
			want = append(want, int32(i))
		}
	}
	for _, name := range bulkSinks {
		t.Run(name, func(t *testing.T) {
			h, mod := bulkSink(t, name, map[string]string{"max_output_bytes": "1000000"})
			h.resetBatch(msgs(bodies...))
			if status := call(t, mod, "wqhost_handle_batch"); status != 0 {
				t.Fatalf("status %d (error %q), want 0", status, h.errText)
			}
			var got []int32
			for i := range bodies {
				if v, ok := h.verdicts[int32(i)]; ok && v.status == 2 {
					got = append(got, int32(i))
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("rejected %v, want %v", got, want)
			}
		})
	}
}

// TestMessageHandlerOnBatchBinding: a module written with Handle (handler! in Rust) run
// through wqhost_handle_batch handles each message on its own: its result becomes the
// message's verdict and its outputs are tied to it.
func TestMessageHandlerOnBatchBinding(t *testing.T) {
	for _, name := range []string{"echo-go", "echo-tinygo", "echo-rust"} {
		t.Run(name, func(t *testing.T) {
			h, mod := reactor(t, name)
			bodies := []string{strings.Repeat("x", 70000), "hello", "", "short"}
			h.resetBatch(msgs(bodies...))
			status := call(t, mod, "wqhost_handle_batch")
			ends, out := h.endBatch(status)
			if status != 0 || len(out) != 0 {
				t.Fatalf("status %d (error %q), call outputs %d; want 0 and none", status, h.errText, len(out))
			}
			for i, e := range ends {
				if v, ok := h.verdicts[int32(i)]; !ok || v.status != 0 || !slices.Equal(e.outputs, []string{":" + bodies[i]}) {
					t.Errorf("message %d: verdict %+v (set %v), outputs of %d, want ok with its echo", i, v, ok, len(e.outputs))
				}
			}
			// After the batch call a plain call emits to the call again.
			h.reset([]byte("after"), nil)
			if e := h.endSingle(call(t, mod, "wqhost_handle")); e.status != 0 || !slices.Equal(e.outputs, []string{":after"}) || h.outputs[0].index != -1 {
				t.Fatalf("wqhost_handle after a batch call: %+v, want ok with one call output", e)
			}

			h.resetBatch(msgs("a", "b"))
			h.emitCode = -3
			status = call(t, mod, "wqhost_handle_batch")
			ends, _ = h.endBatch(status)
			for i, e := range ends {
				if e.status != 1 || !strings.Contains(e.reason, "too large") {
					t.Errorf("emit too large, message %d ends %+v, want retried naming it", i, e)
				}
			}
		})
	}
	for _, name := range []string{"billing-go", "billing-tinygo"} {
		t.Run(name, func(t *testing.T) {
			h, mod := reactor(t, name)
			h.config = map[string]string{"tax_rate": "0.2"}
			h.resetBatch(msgs(`{"id":"tx-1","account":"acme","currency":"EUR","amount":10}`, `{"id":`, `{"id":"tx-3","account":"acme","currency":"EUR","amount":1}`))
			status := call(t, mod, "wqhost_handle_batch")
			ends, _ := h.endBatch(status)
			if status != 0 {
				t.Fatalf("status %d, want 0", status)
			}
			if ends[0].status != 0 || len(ends[0].outputs) != 1 || !strings.Contains(ends[0].outputs[0], `"total_cents":1200`) {
				t.Errorf("message 0 ends %+v, want ok with its priced line", ends[0])
			}
			if ends[1].status != 2 || !strings.Contains(ends[1].reason, "malformed transaction JSON") || len(ends[1].outputs) != 0 {
				t.Errorf("message 1 ends %+v, want rejected as malformed", ends[1])
			}
			if ends[2].status != 0 || len(ends[2].outputs) != 1 || !strings.Contains(ends[2].outputs[0], `"id":"tx-3"`) {
				t.Errorf("message 2 ends %+v, want ok with its own priced line", ends[2])
			}
		})
	}
}
