package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		code  int
		wants []string
	}{
		{[]string{"examples/handlers/billing-go/billing-go.wasm"}, 0, []string{"ok, fits abi wqhost/v1", "batches: yes, exports wqhost_handle_batch"}},
		{[]string{"runtime/testdata/guest/guest.wasm"}, 0, []string{"ok, fits abi wqhost/v1", "batches: no wqhost_handle_batch export"}},
		{[]string{"--abi", "wasi-stdio", "examples/handlers/upper-stdio/upper-stdio.wasm"}, 0, []string{"ok, fits abi wasi-stdio"}},
		// An Extism plugin: detected from its imports, its callable functions listed.
		{[]string{"examples/handlers/extism-vowels-tinygo/extism-vowels-tinygo.wasm"}, 0, []string{"ok, fits abi extism", "functions: count_vowels (a binding names"}},
		{[]string{"runtime/testdata/noexport/noexport.wasm"}, 1, []string{"does not fit abi wqhost/v1", "1 problem", "missing export wqhost_handle"}},
		{[]string{"runtime/testdata/badimport/badimport.wasm"}, 1, []string{"imports unknown host function wqhost.no_such_function"}},
		{[]string{"--abi", "wasi-stdio", "examples/handlers/billing-go/billing-go.wasm"}, 1, []string{"missing export _start", "which only wqhost/v1 modules may use"}},
		{[]string{"README.md"}, 1, []string{"not a valid wasm module"}},
		// Its start function never returns: refused within --timeout, not accepted.
		{[]string{"--timeout", "500ms", "runtime/testdata/hang/hang.wasm"}, 1, []string{"does not load", "start function", "time limit (500ms)"}},
		{[]string{"--timeout", "0s", "runtime/testdata/hang/hang.wasm"}, 2, []string{"--timeout 0s"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			wq(t, repoRoot, append([]string{"validate"}, tc.args...)...).expect(t, tc.code, "validate", tc.wants...)
		})
	}
}

// TestModuleThatIsNotARegularFile: a module path that is a FIFO (which used to hang the
// host, deaf to SIGTERM) or /dev/zero (which took it past 4 GiB) is refused at load with
// exit 2 and a message naming the key, within a second of wall time on a quiet machine (the
// bound asserted here is generous, for a loaded CI machine; a hang would hit it).
func TestModuleThatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "handler.wasm")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ module, want string }{
		{fifo, "is a FIFO"}, {"/dev/zero", "is a character device"}, {dir, "is a directory"},
	} {
		cfg := filepath.Join(dir, "wqhost.yaml")
		yaml := fmt.Sprintf("data_dir: %s\nadmin: {addr: \"off\"}\ntenants:\n  default:\n    bindings:\n      b: {queue: jobs, module: %q}\n", filepath.Join(dir, "data"), tc.module)
		if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		wq(t, dir, "run", "--config", cfg).expect(t, 2, "run with module "+tc.module, "tenants.default.bindings.b.module", tc.want)
		if el := time.Since(start); el > 20*time.Second {
			t.Errorf("module %s: refused after %s", tc.module, el)
		}
	}
}
