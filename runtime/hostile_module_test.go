package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// handleModule returns a hand-assembled wqhost/v1 module whose wqhost_handle runs body (which
// must leave an i32 status), with the marker's signature given by markerParams.
func handleModule(markerParams []byte, body ...[]byte) []byte {
	return wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1", Params: markerParams, Body: drops(len(markerParams))},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: concat(body...)},
	)
}

func drops(int) []byte { return nil } // parameters need no code: the body ignores them

func concat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// TestStackOverflowReportedAsSuch: endless recursion in a tenant with a small memory limit is
// a stack overflow, not "exceeded its memory limit" (every trap of an instance near its
// memory limit used to be reported as a memory-limit breach).
func TestStackOverflowReportedAsSuch(t *testing.T) {
	e := testEngine(t)
	ctx := context.Background()
	// wqhost_handle (function 1) calls itself for ever.
	m, err := e.Compile(ctx, "recurse.wasm", handleModule(nil, wasmtest.Call(1)), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	for _, pages := range []uint32{16, 1024} { // 1 MiB: near its limit; 64 MiB: far from it
		ten, err := e.Tenant(fmt.Sprintf("t-recurse-%d", pages), TenantLimits{MemoryPages: pages})
		if err != nil {
			t.Fatal(err)
		}
		p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Call(ctx, &Input{ID: "m1"})
		_ = p.Close(ctx)
		if !errors.Is(err, ErrStackOverflow) || errors.Is(err, ErrMemoryLimit) {
			t.Errorf("memory %d pages: err = %v; want ErrStackOverflow and not ErrMemoryLimit", pages, err)
		}
	}
}

// TestValidateRefusesMarkerWithWrongSignature: wqhost_abi_v1 is () -> () (docs/abi.md); an
// export of that name with another signature does not declare the ABI.
func TestValidateRefusesMarkerWithWrongSignature(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		params []byte
		want   string
	}{
		{"ok", nil, ""},
		{"i32", []byte{wasmtest.I32}, "export wqhost_abi_v1 has signature (i32)->(), want ()->()"},
	} {
		path := filepath.Join(dir, tc.name+".wasm")
		if err := os.WriteFile(path, handleModule(tc.params, wasmtest.I32Const(0)), 0o644); err != nil {
			t.Fatal(err)
		}
		err := Validate(context.Background(), path, ABIWqhostV1)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v; want %q", tc.name, err, tc.want)
		}
	}
}

// TestValidateAndStartRunsStartFunction: what `wqhost validate` runs fails a module whose
// start function never returns within the time limit, and a failing self test, while a
// healthy module passes.
func TestValidateAndStartRunsStartFunction(t *testing.T) {
	dir := t.TempDir()
	selfTest := func(rc int32) []byte {
		return wasmtest.Module(
			wasmtest.Func{Export: "wqhost_abi_v1"},
			wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(0)},
			wasmtest.Func{Export: "wqhost_self_test", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(rc)},
		)
	}
	spinSelfTest := wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(0)},
		wasmtest.Func{Export: "wqhost_self_test", Results: []byte{wasmtest.I32}, Body: concat(wasmtest.Loop, wasmtest.I32Const(0))},
	)
	hangStart := wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(0)},
		wasmtest.Func{Export: "_initialize", Body: wasmtest.Loop},
	)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const limit = 300 * time.Millisecond
	for _, tc := range []struct {
		name, path     string
		want           error
		compileTimeout time.Duration // 0: the default
	}{
		{"healthy", write("ok.wasm", selfTest(0)), nil, 0},
		{"self test fails", write("fail.wasm", selfTest(3)), ErrSelfTest, 0},
		{"self test spins", write("spin.wasm", spinSelfTest), ErrSelfTest, 0},
		// Hand-assembled rather than testdata/hang (Go): ValidateAndStart keeps no compilation
		// cache, and compiling a 2 MB Go module under -race on a loaded machine takes most
		// of the bound below. TestStartFunctionNeverReturns runs the Go one.
		{"start never returns", write("hang.wasm", hangStart), ErrTimeout, 0},
		// Within every structural cap, but its compile takes seconds: past the budget it
		// is refused by the compile child, not compiled by the caller.
		{"compile outruns its budget", write("slow.wasm", slowModule()), ErrCompileBudget, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := ValidateAndStart(context.Background(), tc.path, ABIWqhostV1, ValidateOptions{Timeout: limit, CompileTimeout: tc.compileTimeout})
				done <- err
			}()
			select {
			case err := <-done:
				if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
					t.Fatalf("ValidateAndStart = %v; want %v", err, tc.want)
				}
			case <-time.After(time.Minute): // far above the limit: only a hang gets here
				t.Fatal("ValidateAndStart hung")
			}
		})
	}
}
