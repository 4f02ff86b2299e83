package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
)

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
		if !maps.Equal(h.config, tc.config) {
			// Config is fixed for an instance's life (docs/abi.md) and the SDK reads each key
			// once, so other config takes a new instance, as it does in the host.
			h, mod = reactor(t, name)
			h.config = tc.config
		}
		t.Run(tc.name, func(t *testing.T) {
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

// countVowelsBuilds are every build of count-vowels: the table-driven Go source, the per-char
// Go source (Extism's algorithm), each built by Go and by TinyGo, and the Rust handler.
var countVowelsBuilds = []string{
	"count-vowels-go", "count-vowels-tinygo",
	"count-vowels-perchar-go", "count-vowels-perchar-tinygo",
	"count-vowels-rust",
}

// TestCountVowels checks the Extism-compatible output of every build of count-vowels.
func TestCountVowels(t *testing.T) {
	for _, name := range countVowelsBuilds {
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

// TestCountVowelsBuildsAgree holds every build of count-vowels to count-vowels-go's output,
// byte for byte, on bodies with non-ASCII runes and a vowels config outside ASCII. The Go
// sources count invalid UTF-8 as U+FFFD; the Rust handler rejects it, so it gets valid text.
func TestCountVowelsBuildsAgree(t *testing.T) {
	bodies := []string{"Hello, World!", "ÀEIOU é àé", strings.Repeat("The quick brown fox é ", 100), "a\xffe\xef\xbf\xbd"}
	for _, vowels := range []string{"", "aeiouAEIOU", "Àéo", "\ufffda"} {
		run := func(name string) []string {
			h, mod := reactor(t, name)
			if vowels != "" {
				h.config = map[string]string{"vowels": vowels}
			}
			var outs []string
			for _, body := range bodies {
				if name == "count-vowels-rust" && !utf8.ValidString(body) {
					continue
				}
				h.reset([]byte(body), nil)
				if got := call(t, mod, "wqhost_handle"); got != 0 || len(h.outputs) != 1 {
					t.Fatalf("%s, vowels %q, body %q: status %d, %d outputs (error %q), want 0 and one", name, vowels, body, got, len(h.outputs), h.errText)
				}
				outs = append(outs, string(h.outputs[0].body))
			}
			return outs
		}
		want := run("count-vowels-go")
		for _, name := range countVowelsBuilds[1:] {
			got, want := run(name), want
			if name == "count-vowels-rust" {
				// It skipped the last body, the one that is not UTF-8.
				want = want[:len(bodies)-1]
			}
			if !slices.Equal(got, want) {
				t.Errorf("vowels %q: %s gave %q, count-vowels-go %q", vowels, name, got, want)
			}
		}
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
