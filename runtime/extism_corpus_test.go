package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/sys"
)

// Extism's own corpus: the plugins of github.com/extism/go-sdk's wasm/ folder, read from the
// Go module cache (the bench module depends on the go-sdk; `go mod download` in bench/ fetches
// it), run through wqhost with the results go-sdk's own extism_test.go expects.

// extismSDKDir is the go-sdk's directory in the module cache at the version bench/go.mod
// requires, or "" with the reason it is not there.
func extismSDKDir(t testing.TB) (string, string) {
	t.Helper()
	mod, err := os.ReadFile("../bench/go.mod")
	if err != nil {
		return "", "bench/go.mod: " + err.Error()
	}
	m := regexp.MustCompile(`github.com/extism/go-sdk (v\S+)`).FindSubmatch(mod)
	if m == nil {
		return "", "bench/go.mod does not require github.com/extism/go-sdk"
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			return "", "go env GOMODCACHE: " + err.Error()
		}
		cache = strings.TrimSpace(string(out))
	}
	dir := filepath.Join(cache, "github.com", "extism", "go-sdk@"+string(m[1]))
	if _, err := os.Stat(filepath.Join(dir, "wasm", "count_vowels.wasm")); err != nil {
		return "", fmt.Sprintf("the module cache has no github.com/extism/go-sdk@%s (run `go mod download` in bench/)", m[1])
	}
	return dir, ""
}

// corpusStep is one call of a corpus plugin and what go-sdk's tests expect of it.
type corpusStep struct {
	fn, input string
	want      string         // the output; with wantErr unset
	wantErr   string         // a failure whose reason contains this
	wantExit  *uint32        // a failure by a WASI exit with this code
	wantIs    error          // a failure that is this
	check     func(b []byte) // the output, checked otherwise
}

type corpusCase struct {
	file        string
	config      map[string]string
	setup       func(t *testing.T, cfg *PoolConfig, e *Engine, logs *syncBuffer) func(p *Pool)
	steps       []corpusStep
	unsupported string // why wqhost cannot run it
	wantPoolErr string // with unsupported: it loads, but a binding calling steps[0].fn is refused so
}

func exitCode(c uint32) *uint32 { return &c }

func corpusCases(sdk string) []corpusCase {
	vowels := func(n int) func(b []byte) {
		return func(b []byte) {
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil || v["count"] != float64(n) {
				panic(fmt.Sprintf("count_vowels output %s, want count %d", b, n))
			}
		}
	}
	return []corpusCase{
		{file: "count_vowels.wasm", steps: []corpusStep{
			{fn: "count_vowels", input: "hello world", check: vowels(3)},
			{fn: "count_vowels", input: "aaaaaa", check: vowels(6)},
			{fn: "count_vowels", input: "", check: vowels(0)},
			{fn: "count_vowels", input: "bbbbbbb", check: vowels(0)},
		}},
		// TestMultipleCallsOutput: "total" is a var kept by the instance across calls.
		{file: "count_vowels.wasm", steps: []corpusStep{
			{fn: "count_vowels", input: "aaa", want: `{"count":3,"total":3,"vowels":"aeiouAEIOU"}`},
			{fn: "count_vowels", input: "bbba", want: `{"count":1,"total":4,"vowels":"aeiouAEIOU"}`},
		}},
		{file: "hello.wasm", steps: []corpusStep{{fn: "run_test", want: "Hello, world!"}}},
		{file: "config.wasm", config: map[string]string{"thing": "hello"}, steps: []corpusStep{{fn: "run_test", want: `{"config": "hello"}`}}},
		{file: "config.wasm", steps: []corpusStep{{fn: "run_test", want: `{"config": "<unset by host>"}`}}},
		{file: "fail.wasm", steps: []corpusStep{{fn: "run_test", wantIs: ErrPluginFailed, wantErr: "(code 1): Some error message"}}},
		{file: "exit.wasm", config: map[string]string{"code": "-1"}, steps: []corpusStep{{fn: "_start", wantExit: exitCode(0xffffffff)}}},
		{file: "exit.wasm", config: map[string]string{"code": "500"}, steps: []corpusStep{{fn: "_start", wantExit: exitCode(500)}}},
		{file: "exit.wasm", config: map[string]string{"code": "abc"}, steps: []corpusStep{{fn: "_start", wantExit: exitCode(1)}}},
		{file: "exit.wasm", steps: []corpusStep{{fn: "_start", wantExit: exitCode(2)}}},
		{file: "alloc.wasm", steps: []corpusStep{{fn: "run_test"}}},
		{file: "input_offset.wasm", steps: []corpusStep{{fn: "input_offset_length", input: "hello world", check: func(b []byte) {
			if len(b) == 0 || b[0] != 11 {
				panic(fmt.Sprintf("output %v, want the input's length 11 first", b))
			}
		}}}},
		// TestVar: the host sets var a to 10; each call doubles it.
		{file: "var.wasm", setup: func(t *testing.T, _ *PoolConfig, _ *Engine, _ *syncBuffer) func(p *Pool) {
			return func(p *Pool) { setVar(t, p, "a", 10) }
		}, steps: []corpusStep{
			{fn: "run_test", check: func([]byte) {}},
			{fn: "run_test", check: func([]byte) {}},
		}},
		{file: "log.wasm", setup: func(t *testing.T, _ *PoolConfig, _ *Engine, logs *syncBuffer) func(p *Pool) {
			return nil
		}, steps: []corpusStep{{fn: "run_test", check: func([]byte) {}}}},
		{file: "http.wasm", setup: httpCorpusSetup, steps: []corpusStep{{fn: "run_test", check: func(b []byte) {
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil || v["title"] != "delectus aut autem" {
				panic(fmt.Sprintf("http.wasm output %s, want the todo", b))
			}
		}}}},
		{file: "http_headers.wasm", setup: httpCorpusSetup, steps: []corpusStep{{fn: "http_get", input: `{"url":"https://extism.org"}`, check: func(b []byte) {
			var h map[string]string
			if err := json.Unmarshal(b, &h); err != nil || h["content-type"] != "text/html; charset=utf-8" {
				panic(fmt.Sprintf("http_headers.wasm output %s, want content-type text/html; charset=utf-8", b))
			}
		}}}},
		{file: "fs.wasm", setup: mountTestdata(sdk), unsupported: "opens its file read-write; a binding's directory is mounted read-only",
			steps: []corpusStep{{fn: "run_test", wantIs: ErrPluginFailed}}},
		{file: "read_write.wasm", setup: mountTestdata(sdk), config: map[string]string{"path": "/mnt/test.txt"}, steps: []corpusStep{
			{fn: "try_read", want: "hello world!"},
			{fn: "try_write", input: "hello hello!", wantIs: ErrPluginFailed, wantErr: "Failed to write file"},
		}},
		{file: "std_command.wasm", steps: []corpusStep{{fn: "_start", input: "ben", want: "hello ben"}}},
		{file: "hello_haskell.wasm", config: map[string]string{"greeting": "Howdy"}, steps: []corpusStep{{fn: "testing", input: "John", want: "Howdy, John"}}},
		{file: "sleep.wasm", config: map[string]string{"duration": "0"}, steps: []corpusStep{{fn: "run_test", want: "slept for 0 seconds"}}},
		// TestJsonManifest: a plugin sleeping 3 s under a 100 ms limit is stopped at it.
		{file: "sleep.wasm", config: map[string]string{"duration": "3"}, setup: func(t *testing.T, cfg *PoolConfig, _ *Engine, _ *syncBuffer) func(p *Pool) {
			cfg.Timeout = 100 * time.Millisecond
			return nil
		}, steps: []corpusStep{{fn: "run_test", wantIs: ErrTimeout}}},
		{file: "noop.wasm", steps: []corpusStep{{fn: "run_test"}}},
		{file: "replace.wasm", steps: []corpusStep{{fn: "run_test", input: "", want: ""}}},
		{file: "println.wasm", steps: []corpusStep{{fn: "run_test", input: "hello"}}},
		{file: "count_vowels_std.wasm", config: map[string]string{"thing": "x"}, steps: []corpusStep{
			{fn: "_start", input: "hello world", want: `{"count": 3, "config": "x", "a": "this is var a"}`},
		}},
		{file: "fs_std.wasm", setup: mountTestdata(sdk), unsupported: "opens its file read-write; a binding's directory is mounted read-only",
			steps: []corpusStep{{fn: "run_test", wantIs: ErrPluginFailed}}},
		{file: "host.wasm", unsupported: "imports a user-defined host function (extism:host/user.mult)"},
		{file: "host_memory.wasm", unsupported: "imports a user-defined host function (host.to_upper)"},
		{file: "host_multiple.wasm", unsupported: "imports user-defined host functions (extism:host/user)"},
		{file: "main.wasm", unsupported: "links another module of the manifest (lib.capitalize): one module per binding"},
		{file: "lib.wasm", unsupported: "a library module main.wasm links: its function capitalize takes parameters, which no Extism host call passes",
			wantPoolErr: "want ()->(i32) or ()->()", steps: []corpusStep{{fn: "capitalize"}}},
		{file: "nested.c.instr.wasm", unsupported: "imports Dylibso Observe's instrumentation (dylibso_observe)"},
	}
}

// httpCorpusSetup serves the two URLs the HTTP plugins fetch from a loopback TLS server: the
// binding's allow rules name the real hosts, the fake DNS maps them to it.
func httpCorpusSetup(t *testing.T, cfg *PoolConfig, e *Engine, _ *syncBuffer) func(p *Pool) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/todos/1" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"userId": 1, "id": 1, "title": "delectus aut autem", "completed": false}`))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<html></html>"))
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	e.httpTr.TLSClientConfig.InsecureSkipVerify = true
	dial := e.httpTr.DialContext
	e.httpTr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dial(ctx, network, strings.TrimSuffix(addr, ":443")+":"+port)
	}
	cfg.HTTP = &HTTPPolicy{Allow: rules(t, "https://jsonplaceholder.typicode.com/todos/", "https://extism.org")}
	return func(p *Pool) {
		p.httpc.resolve = func(string) (string, bool) { return "public:127.0.0.1", true }
	}
}

// mountTestdata mounts a directory holding go-sdk's testdata at /mnt, read-only.
func mountTestdata(sdk string) func(t *testing.T, cfg *PoolConfig, _ *Engine, _ *syncBuffer) func(p *Pool) {
	return func(t *testing.T, cfg *PoolConfig, _ *Engine, _ *syncBuffer) func(p *Pool) {
		root := t.TempDir()
		b, err := os.ReadFile(filepath.Join(sdk, "testdata", "test.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, "mnt"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "mnt", "test.txt"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg.ReadOnlyDir = root
		return nil
	}
}

// setVar sets a var of the pool's one warm instance, as go-sdk's test sets plugin.Var.
func setVar(t *testing.T, p *Pool, k string, v uint64) {
	for _, inst := range p.slots.drainIdle() {
		if inst.st.ext.vars == nil {
			inst.st.ext.vars = map[string][]byte{}
		}
		b := []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} // go-sdk's uintToLEBytes
		inst.st.ext.vars[k] = b
		inst.st.ext.varBytes += len(k) + len(b)
		p.slots.addIdle(inst)
	}
}

func getVar(p *Pool, k string) (uint64, bool) {
	for _, inst := range p.slots.drainIdle() {
		defer p.slots.addIdle(inst)
		if b, ok := inst.st.ext.vars[k]; ok {
			var w [8]byte
			copy(w[:], b)
			return le64(w[:]), true
		}
	}
	return 0, false
}

// TestExtismCorpus runs every plugin of the go-sdk's wasm/ folder.
func TestExtismCorpus(t *testing.T) {
	sdk, why := extismSDKDir(t)
	if sdk == "" {
		t.Skip("extism corpus: skipped: " + why)
	}
	files, _ := filepath.Glob(filepath.Join(sdk, "wasm", "*.wasm"))
	cases := corpusCases(sdk)
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.file] = true
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s: a corpus plugin without a case", filepath.Base(f))
		}
	}
	passed, unsupported, failed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, c := range cases {
		ok := t.Run(fmt.Sprintf("%02d_%s", i, c.file), func(t *testing.T) { runCorpusCase(t, sdk, c) })
		switch {
		case !ok:
			failed[c.file] = true
		case c.unsupported != "":
			unsupported[c.file] = true
		default:
			passed[c.file] = true
		}
	}
	for f := range failed {
		delete(passed, f)
	}
	t.Logf("extism corpus: plugins=%d passed=%d unsupported=%d failed=%d", len(files), len(passed), len(unsupported), len(failed))
	fmt.Printf("extism corpus: plugins=%d passed=%d unsupported=%d failed=%d\n", len(files), len(passed), len(unsupported), len(failed))
}

func runCorpusCase(t *testing.T, sdk string, c corpusCase) {
	wasm, err := os.ReadFile(filepath.Join(sdk, "wasm", c.file))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	e, err := NewEngine(context.Background(), EngineConfig{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	// Detected from the imports, as a binding without abi: would load it.
	m, err := e.Compile(context.Background(), c.file, wasm, ABIExtism)
	if c.wantPoolErr != "" && err == nil {
		ten, _ := e.Tenant("corpus", TenantLimits{})
		if _, err = ten.NewPool(context.Background(), m, PoolConfig{Binding: "corpus", Function: c.steps[0].fn}); err == nil || !strings.Contains(err.Error(), c.wantPoolErr) {
			t.Fatalf("NewPool: %v, want an error containing %q", err, c.wantPoolErr)
		}
	}
	if c.unsupported != "" && (len(c.steps) == 0 || c.wantPoolErr != "") {
		if err == nil {
			t.Fatalf("loaded, but the corpus table says it cannot be: %s", c.unsupported)
		}
		t.Logf("unsupported: %s (load error: %v)", c.unsupported, err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	ten, err := e.Tenant("corpus", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := PoolConfig{Binding: "corpus", MinInstances: 1, MaxInstances: 1, Timeout: 10 * time.Second, Config: c.config, OutputQueue: "out", Function: c.steps[0].fn}
	var after func(p *Pool)
	if c.setup != nil {
		after = c.setup(t, &cfg, e, logs)
	}
	p, err := ten.NewPool(context.Background(), m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if !p.v.fuel {
		t.Fatalf("pool variant %+v: the plugin runs without the fuel counter", p.v)
	}
	if after != nil {
		after(p)
	}
	for i, s := range c.steps {
		if s.fn != p.ext {
			p.ext = s.fn // a second function of the same plugin: its own instance
			for _, inst := range p.slots.drainIdle() {
				inst.close(context.Background())
				p.total.Add(-1)
			}
		}
		out, err := p.Call(context.Background(), &Input{ID: fmt.Sprintf("m%d", i), Body: []byte(s.input)})
		switch {
		case s.wantExit != nil:
			var exit *sys.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != *s.wantExit {
				t.Fatalf("step %d: err %v, want WASI exit code %d", i, err, *s.wantExit)
			}
		case s.wantIs != nil || s.wantErr != "":
			if err == nil || s.wantIs != nil && !errors.Is(err, s.wantIs) || !strings.Contains(err.Error(), s.wantErr) {
				t.Fatalf("step %d: err %v, want %v containing %q", i, err, s.wantIs, s.wantErr)
			}
		case err != nil:
			t.Fatalf("step %d: %v\nlog: %s", i, err, logs)
		default:
			var got []byte
			if len(out.Outputs) > 0 {
				got = out.Outputs[0].Body
			}
			if s.check != nil {
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("step %d: %v", i, r)
						}
					}()
					s.check(got)
				}()
			} else if !bytes.Equal(got, []byte(s.want)) {
				t.Fatalf("step %d: output %q, want %q", i, got, s.want)
			}
		}
		if s.wantExit == nil && s.wantIs == nil && s.wantErr == "" {
			if tr := p.Stats().Traps; tr != 0 {
				t.Fatalf("step %d: %d traps counted for a call that succeeded", i, tr)
			}
		}
		switch c.file {
		case "var.wasm":
			if v, _ := getVar(p, "a"); v != 10<<(i+1) {
				t.Fatalf("step %d: var a = %d, want %d", i, v, 10<<(i+1))
			}
		case "log.wasm":
			l := logs.String()
			for _, want := range []string{"this is a warning log", "this is an error log"} {
				if !strings.Contains(l, want) {
					t.Fatalf("log lacks %q: %s", want, l)
				}
			}
			for _, not := range []string{"this is a trace log", "this is a debug log", "this is an info log"} {
				if strings.Contains(l, not) {
					t.Fatalf("log has %q below the host's level: %s", not, l)
				}
			}
		}
	}
}

// TestExtismHTTPPolicy: an Extism plugin's requests take the binding's policy as a wqhost/v1
// guest's do: a URL no rule allows ends the call with the reason, a binding without a policy
// refuses every request, and a credential named by the Wqhost-Credential header is added by
// the host (the header itself never leaves). go-sdk's http_headers plugin sends the request
// its input describes.
func TestExtismHTTPPolicy(t *testing.T) {
	sdk, why := extismSDKDir(t)
	if sdk == "" {
		t.Skip("extism corpus: skipped: " + why)
	}
	wasm, err := os.ReadFile(filepath.Join(sdk, "wasm", "http_headers.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("X-Seen", "yes")
	}))
	defer srv.Close()
	e := testEngine(t)
	m, err := e.Compile(context.Background(), "http_headers.wasm", wasm, ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	ten, _ := e.Tenant("acme", TenantLimits{})
	pool := func(pol *HTTPPolicy) *Pool {
		p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "hooks", Function: "http_get", OutputQueue: "out", Timeout: 10 * time.Second, HTTP: pol})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		return p
	}
	req := func(url string, headers map[string]string) *Input {
		b, _ := json.Marshal(map[string]any{"url": url, "headers": headers})
		return &Input{ID: "m1", Body: b}
	}
	allowed := pool(&HTTPPolicy{
		Allow:       rules(t, srv.URL+"/ok"),
		Credentials: map[string]Credential{"api": {Header: "Authorization", Value: "Bearer s3cr3t", Hosts: []string{"127.0.0.1"}}},
	})
	out, err := allowed.Call(context.Background(), req(srv.URL+"/ok", map[string]string{"Wqhost-Credential": "api", "X-Mine": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("Authorization") != "Bearer s3cr3t" || h.Get("X-Mine") != "1" || h.Get("Wqhost-Credential") != "" {
		t.Fatalf("server saw %v: want the credential added, the guest's header kept, Wqhost-Credential removed", h)
	}
	if len(out.Outputs) != 1 || !strings.Contains(string(out.Outputs[0].Body), `"x-seen":"yes"`) {
		t.Fatalf("outputs %+v: want the response headers", out.Outputs)
	}
	for _, tc := range []struct {
		p    *Pool
		url  string
		want string
	}{
		{allowed, srv.URL + "/other", "no http.allow rule matches"},
		{pool(nil), srv.URL + "/ok", "the binding has no http: policy"},
	} {
		_, err := tc.p.Call(context.Background(), req(tc.url, map[string]string{}))
		if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: err %v, want the call ended with %q", tc.url, err, tc.want)
		}
	}
	if len(got) != 0 {
		t.Fatal("a refused request reached the server")
	}
}
