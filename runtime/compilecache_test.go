package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// TestValidatorPanicIsAnError: wazero 1.12's validator panics on a 30-byte module
// (wasmtest.BadCallType); Compile returns ErrCompilerPanic naming the module instead of the
// panic ending the process, and the engine compiles the next module as usual.
func TestValidatorPanicIsAnError(t *testing.T) {
	ctx := context.Background()
	e := testEngine(t)
	_, err := e.Compile(ctx, "panic.wasm", wasmtest.BadCallType, ABIWqhostV1)
	if !errors.Is(err, ErrCompilerPanic) || !strings.HasPrefix(err.Error(), "runtime: panic.wasm: wazero panicked") ||
		!strings.Contains(err.Error(), "index out of range") {
		t.Fatalf("err = %v; want ErrCompilerPanic naming panic.wasm and the panic", err)
	}
	if _, err := e.Compile(ctx, "ok.wasm", handleModule(nil, wasmtest.I32Const(0)), ABIWqhostV1); err != nil {
		t.Fatalf("a good module after the panic: %v", err)
	}
	path := filepath.Join(t.TempDir(), "panic.wasm")
	if err := os.WriteFile(path, wasmtest.BadCallType, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Validate(ctx, path, ABIWqhostV1); !errors.Is(err, ErrCompilerPanic) {
		t.Fatalf("Validate: err = %v; want ErrCompilerPanic", err)
	}
}

// TestInstrumentCacheNeverRunsAForeignFile: what sits at an instrumented module's cache name
// runs only if its seal matches the module it is loaded for. A truncated file, another
// module's instrumented copy (sealed for that module) and a bare module are each
// instrumented again and overwritten: the call runs the loaded module's code, not theirs.
func TestInstrumentCacheNeverRunsAForeignFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	good := handleModule(nil, wasmtest.I32Const(0))
	evil := handleModule(nil, []byte{0x00}) // unreachable: every call traps
	fresh, err := instrumentRecovered(good)
	if err != nil {
		t.Fatal(err)
	}
	evilFuel, err := instrumentRecovered(evil)
	if err != nil {
		t.Fatal(err)
	}
	engine := func() *Engine {
		e, err := NewEngine(ctx, EngineConfig{CacheDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close(ctx) })
		return e
	}
	if _, err := engine().Compile(ctx, "good.wasm", good, ABIWqhostV1); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "wqhost-fuel-*"))
	if len(names) != 1 {
		t.Fatalf("cache holds %v; want one instrumented module", names)
	}
	cached := names[0]
	sealed, err := os.ReadFile(cached)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"truncated", sealed[:len(sealed)/2]},
		{"empty", nil},
		{"another module's sealed copy", sealFuel(digestOf(evil), evilFuel.wasm)},
		{"a bare module", evilFuel.wasm},
		{"the seal with other code", append(append([]byte(nil), sealed[:32]...), evilFuel.wasm...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(cached, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			e := engine()
			m2, err := e.Compile(ctx, "good.wasm", good, ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			if m2.c.fuel == nil || !bytes.Equal(m2.c.fuel.wasm, fresh.wasm) {
				t.Fatalf("loaded instrumented code is not good.wasm's")
			}
			if got, _ := os.ReadFile(cached); !bytes.Equal(got, sealed) {
				t.Errorf("cache file not rewritten with good.wasm's sealed copy")
			}
			ten, err := e.Tenant("t", TenantLimits{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(ctx, m2, PoolConfig{Binding: "b", Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctx)
			if _, err := p.Call(ctx, &Input{ID: "m"}); err != nil {
				t.Fatalf("call ran other code: %v", err)
			}
		})
	}
}

func digestOf(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}
