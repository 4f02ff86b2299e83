package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestHostileModulesRefusedByCLI: a compile bomb and the module that makes wazero's
// validator panic are refused by `wqhost validate` and `wqhost call` with the named error
// (which cap, its value, the function; or the recovered panic) and the usual exit codes,
// instead of minutes of compiling or a crash.
func TestHostileModulesRefusedByCLI(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	loops := write("loops.wasm", wasmtest.Module(wasmtest.Handle(wasmtest.NestedLoops(10_000))))
	big := write("big.wasm", wasmtest.Module(wasmtest.Handle(wasmtest.StraightLine(6<<20))))
	panics := write("panic.wasm", wasmtest.BadCallType)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"10k nested loops", loops, "compile limit: 501 in function 0, above max_loop_depth 500"},
		{"6 MB function", big, "above max_function_bytes 1048576"},
		{"validator panic", panics, "wazero panicked compiling the module (a wazero bug; the module is refused): runtime error: index out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wq(t, dir, "validate", tc.path).expect(t, 1, "validate", tc.path, tc.want)
			wq(t, dir, "call", tc.path).expect(t, 2, "call", tc.path, tc.want)
		})
	}
}
