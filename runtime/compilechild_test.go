package runtime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

func childEngine(t *testing.T, dir string, timeout time.Duration, memory uint64) *Engine {
	t.Helper()
	e, err := NewEngine(context.Background(), EngineConfig{
		CacheDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CompileInChild: true, CompileTimeout: timeout, CompileMemoryBytes: memory,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// slowModule compiles in seconds with the optimizing compiler while inside every default
// cap: 10,000 conditional branches in one function.
func slowModule() []byte {
	body := []byte{0x02, 0x40}
	for range DefaultMaxBranches {
		body = append(body, 0x41, 0x00, 0x0d, 0x00)
	}
	return handleModule(nil, append(body, 0x0b, 0x41, 0x00))
}

// TestCompileInChildFillsTheCache: with CompileInChild a module is compiled by a child
// process (this test binary, re-executed) into the cache directory; the host's pool loads
// it from there and runs it, and a second engine on the directory starts no child for it.
func TestCompileInChildFillsTheCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	good := handleModule(nil, wasmtest.I32Const(0))
	e1 := childEngine(t, dir, 0, 0)
	m, err := e1.Compile(ctx, "ok.wasm", good, ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	marks, _ := filepath.Glob(filepath.Join(dir, "wqhost-module-v*-*-wqhost_v1.json"))
	entries, _ := os.ReadDir(dir)
	if len(marks) != 1 || len(entries) < 3 { // the facts, the instrumented copy, wazero's cache
		t.Fatalf("cache dir holds %d entries, facts %v; want wazero's compiled code, the instrumented copy and the module's facts", len(entries), marks)
	}
	if m.c.fuel == nil {
		t.Fatal("module loaded through a child has no fuel counter")
	}
	pool := func(e *Engine, m *Module) {
		t.Helper()
		tn, err := e.Tenant("t", TenantLimits{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := tn.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		if _, err := p.Call(ctx, &Input{ID: "m"}); err != nil {
			t.Fatal(err)
		}
	}
	pool(e1, m)
	// A budget no child could meet: the mark is what lets this compile through.
	e2 := childEngine(t, dir, time.Nanosecond, 1)
	m2, err := e2.Compile(ctx, "ok.wasm", good, ABIWqhostV1)
	if err != nil {
		t.Fatalf("second engine on the directory: %v", err)
	}
	pool(e2, m2)
}

// TestChildRefusesLikeTheHost: a module that does not fit its ABI, or makes wazero panic, is
// refused through a child with the error a load in process gives.
func TestChildRefusesLikeTheHost(t *testing.T) {
	ctx := context.Background()
	noHandle := wasmtest.Module(wasmtest.Func{Export: "wqhost_abi_v1"})
	for _, tc := range []struct {
		name string
		wasm []byte
	}{{"abi", noHandle}, {"panic", wasmtest.BadCallType}} {
		_, want := testEngine(t).Compile(ctx, "m.wasm", tc.wasm, ABIWqhostV1)
		_, got := childEngine(t, t.TempDir(), 0, 0).Compile(ctx, "m.wasm", tc.wasm, ABIWqhostV1)
		if want == nil || got == nil || got.Error() != want.Error() || errors.Is(want, ErrCompilerPanic) != errors.Is(got, ErrCompilerPanic) {
			t.Errorf("%s: through a child %v; in process %v", tc.name, got, want)
		}
	}
}

// TestCompileBudget: a module inside every cap whose compile takes seconds is refused with
// ErrCompileBudget when its child runs past the compile timeout or above the memory budget
// (the child is killed, the host is not held), and the engine compiles the next module.
func TestCompileBudget(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		memory  uint64
		want    string
	}{
		{"time", 300 * time.Millisecond, 0, "compile budget exceeded: compiling took more than 300ms (compile timeout)"},
		{"memory", time.Minute, 8 << 20, "compile budget exceeded: compiling needed more than 8388608 bytes of memory (compile memory)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := childEngine(t, t.TempDir(), tc.timeout, tc.memory)
			start := time.Now()
			_, err := e.Compile(ctx, "slow.wasm", slowModule(), ABIWqhostV1)
			if !errors.Is(err, ErrCompileBudget) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
			// A generous bound for a loaded machine: the compile alone takes seconds to
			// a minute, the budget a fraction of that.
			if el := time.Since(start); el > 30*time.Second {
				t.Errorf("refused after %s", el)
			}
		})
	}
}

// TestChildKeepsWhatValidationFound: what validation learns of a module in the child (an
// Extism plugin detected by its imports, its callable functions) reaches the host's module,
// first load and from the cached facts alike.
func TestChildKeepsWhatValidationFound(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	plugin := extPlugin(wasmtest.I32Const(0))
	for i, e := range []*Engine{childEngine(t, dir, 0, 0), childEngine(t, dir, 0, 0)} {
		m, err := e.Compile(ctx, "plugin.wasm", plugin, "")
		if err != nil {
			t.Fatal(err)
		}
		if m.ABI() != ABIExtism {
			t.Fatalf("engine %d: ABI %q, want the detected %q", i, m.ABI(), ABIExtism)
		}
		ten, err := e.Tenant("t", TenantLimits{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Function: "handle", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("engine %d: %v", i, err)
		}
		_, err = p.Call(ctx, &Input{ID: "m"})
		_ = p.Close(ctx)
		if err != nil {
			t.Fatalf("engine %d: call: %v", i, err)
		}
	}
}
