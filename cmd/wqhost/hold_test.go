package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
	"github.com/wqhost/wqhost/runtime"
)

// TestValidateTimeoutBesideHostCalls: `wqhost validate --timeout` on a module whose
// _initialize loops in host calls (WASI random_get, where no fuel check runs) returns
// within the timeout plus runtime.AbandonGrace, exit 1 saying it does not load, instead of
// running as long as the guest does (issue 26: > 45 s under --timeout 3s).
func TestValidateTimeoutBesideHostCalls(t *testing.T) {
	mod := filepath.Join(t.TempDir(), "loop-init.wasm")
	wasm := wasmtest.ModuleImporting([]wasmtest.Import{wasmtest.RandomGet}, 1,
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(0)},
		wasmtest.Func{Export: "_initialize", Body: wasmtest.RandomGetLoop(64 << 10)},
	)
	if err := os.WriteFile(mod, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := wq(t, "", "validate", "--timeout", "1s", mod)
	took := time.Since(start)
	t.Logf("validate --timeout 1s: exit %d after %s (grace %s)", r.code, took.Round(time.Millisecond), runtime.AbandonGrace)
	r.expect(t, 1, "validate", "does not load", "start function", "time limit", "--timeout 1s")
	if limit := time.Second + runtime.AbandonGrace + 30*time.Second; took > limit { // far above: only a hang gets here
		t.Errorf("validate --timeout 1s took %s", took)
	}
}
