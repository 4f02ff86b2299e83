package wasmtest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/internal/wasmtest"
	"github.com/wqhost/wqhost/runtime"
)

// TestBudgetProbesAreLegal: the budget probes pass the structural caps at their defaults and
// the checks of their ABI, as runtime.Validate runs them before a module is compiled: they
// are legal modules, which only a memory or CPU budget can refuse. The 20 MB module is the
// size issue #37 measured (faulttest's TestFaultBudget runs smaller ones, which fit whenever
// it does: every cap is on a count or on one function's body, and smaller modules have fewer
// of the same functions). The type bomb was legal when the issue measured it; the
// max_type_values cap it led to now refuses it in one pass, and admits one just below.
func TestBudgetProbesAreLegal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wasm    []byte
		abi     runtime.ABI
		minSize int    // the probe's point is its size: a generator that shrinks it is wrong
		refused string // the cap that refuses it, if one does
	}{
		{"type bomb 3000x1000", wasmtest.TypeBomb(3000, 1000), runtime.ABIWqhostV1, 3_000_000, "above max_type_values 50000"},
		{"type bomb within max_type_values", wasmtest.TypeBomb(49, 1000), runtime.ABIWqhostV1, 49_000, ""},
		{"20 MB module", wasmtest.BigModule(20_000_000, 1_000_000, 3), runtime.ABIWqhostV1, 20_000_000, ""},
		{"extism allocator", wasmtest.ExtismAllocator(1 << 20), runtime.ABIExtism, 0, ""},
		{"slow start, trapping handler", wasmtest.SlowStartTrap(300_000_000), runtime.ABIWqhostV1, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.wasm) < tc.minSize {
				t.Errorf("%d bytes, want at least %d", len(tc.wasm), tc.minSize)
			}
			f := filepath.Join(t.TempDir(), "probe.wasm")
			if err := os.WriteFile(f, tc.wasm, 0o644); err != nil {
				t.Fatal(err)
			}
			err := runtime.Validate(context.Background(), f, tc.abi)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("not legal: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("Validate = %v; want it refused %s", err, tc.refused)
			}
		})
	}
}

// TestBigModuleVersionsDiffer: each version of BigModule is a module of its own (a hot swap
// compiles it again) of the same size.
func TestBigModuleVersionsDiffer(t *testing.T) {
	a, b := wasmtest.BigModule(1<<20, 64<<10, 1), wasmtest.BigModule(1<<20, 64<<10, 2)
	if string(a) == string(b) || len(a) != len(b) {
		t.Errorf("versions 1 and 2: equal %t, sizes %d and %d; want different bytes of one size", string(a) == string(b), len(a), len(b))
	}
}
