package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestHostileModulesRefusedByCLI: compile bombs and the module that makes wazero's
// validator panic are refused by `wqhost validate` and `wqhost call` with the named error
// (which cap, its value, the function; the compile budget; or the recovered panic) and the
// usual exit codes, instead of minutes of compiling or a crash.
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
	// Within every structural cap (four functions just under 1 MiB each), but its compile
	// needs hundreds of MB: what `run` refuses through the compile budget, these commands
	// refuse through the same budget, not by compiling it themselves.
	line := wasmtest.StraightLine(1<<20 - 64)
	fs := []wasmtest.Func{{Export: "wqhost_abi_v1"}, wasmtest.Handle(line)}
	for _, name := range []string{"f1", "f2", "f3"} {
		fs = append(fs, wasmtest.Func{Export: name, Results: []byte{wasmtest.I32}, Body: line})
	}
	wide := write("wide.wasm", wasmtest.Module(fs...))
	for _, tc := range []struct {
		name, path, want string
		flags            []string
	}{
		{"10k nested loops", loops, "compile limit: 501 in function 0, above max_loop_depth 500", nil},
		{"6 MB function", big, "above max_function_bytes 1048576", nil},
		{"validator panic", panics, "wazero panicked compiling the module (a wazero bug; the module is refused): runtime error: index out of range", nil},
		{"4 MB within the caps", wide, "compile budget exceeded: compiling needed more than 67108864 bytes of memory (compile memory)", []string{"--compile-memory", "64MiB"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wq(t, dir, append([]string{"validate", tc.path}, tc.flags...)...).expect(t, 1, "validate", tc.path, tc.want)
			wq(t, dir, append([]string{"call", tc.path}, tc.flags...)...).expect(t, 2, "call", tc.path, tc.want)
		})
	}
}
