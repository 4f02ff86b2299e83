package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/internal/wasmtest"
	wqruntime "github.com/wqhost/wqhost/runtime"
)

// inputLoadLoop is an Extism plugin whose handle makes n calls of input_load_u64(0), the call
// Extism's PDKs make for every 8 bytes of input (count_vowels.wasm: 128 for 1 KiB).
func inputLoadLoop(n int32) []byte {
	imp := wasmtest.Import{Module: "extism:host/env", Name: "input_load_u64", Params: []byte{wasmtest.I64}, Results: []byte{wasmtest.I64}}
	body := append(wasmtest.I32Const(n), 0x21, 0x00) // local 0 = n
	body = append(body, 0x03, 0x40)                  // loop
	body = append(body, wasmtest.I64Const(0)...)
	body = append(body, wasmtest.Call(0)...)
	body = append(body, wasmtest.Drop...)
	body = append(body, 0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00) // local 0 -= 1 (tee)
	body = append(body, 0x0d, 0x00, 0x0b)                         // br_if 0; end
	body = append(body, wasmtest.I32Const(0)...)
	mod := wasmtest.Spec{Imports: []wasmtest.Import{imp}, Funcs: []wasmtest.Func{{Export: "handle", Results: []byte{wasmtest.I32}, Body: body}}}.Bytes()
	return wasmtest.WithLocals(mod, 1)
}

// BenchmarkExtismHostCall prices one extism:host/env call in wqhost's pool (abi extism, the
// default time limit: the module fuel-instrumented) against the same loop calling a bare
// wazero Go function that reads the same 8 bytes, the floor of any host on wazero, in
// alternating rounds (fastest kept). The difference is what wqhost adds per host call: the
// call state, the charge, the bounds check. Run:
//
//	cd bench && go test -run '^$' -bench ExtismHostCall -benchtime 1x
func BenchmarkExtismHostCall(b *testing.B) {
	ctx := context.Background()
	const n = 1000
	wasm := inputLoadLoop(n)
	body := make([]byte, 1024)

	e, err := wqruntime.NewEngine(ctx, wqruntime.EngineConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(ctx)
	m, err := e.Compile(ctx, "input-load-loop.wasm", wasm, wqruntime.ABIExtism)
	if err != nil {
		b.Fatal(err)
	}
	tenant, err := e.Tenant("bench", wqruntime.TenantLimits{})
	if err != nil {
		b.Fatal(err)
	}
	pool, err := tenant.NewPool(ctx, m, wqruntime.PoolConfig{Binding: "bench", MinInstances: 1, MaxInstances: 1, Timeout: 30 * time.Second, Function: "handle"})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close(ctx)
	in, out := &wqruntime.Input{ID: "bench", Queue: "bench", Body: body}, &wqruntime.Result{}
	pooled := func() error {
		if err := pool.CallInto(ctx, in, out); err != nil {
			return err
		}
		if out.Verdict != wqruntime.VerdictOK {
			return fmt.Errorf("status %d: %s", out.Verdict, out.ErrorText)
		}
		return nil
	}

	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	_, err = rt.NewHostModuleBuilder("extism:host/env").NewFunctionBuilder().WithGoFunction(api.GoFunc(func(_ context.Context, s []uint64) {
		var w [8]byte
		copy(w[:], body[s[0]:])
		s[0] = uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 | uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
	}), []api.ValueType{api.ValueTypeI64}, []api.ValueType{api.ValueTypeI64}).Export("input_load_u64").Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	fn := mod.ExportedFunction("handle")
	raw := func() error { _, err := fn.Call(ctx); return err }

	var nsPooled, nsRaw float64
	b.Run("alternating", func(b *testing.B) {
		for b.Loop() {
			// The rounds below are the figure; b.N is irrelevant.
		}
		best := [2]time.Duration{1 << 62, 1 << 62}
		rounds, calls := shortOr(30, 2), shortOr(50, 2)
		for range rounds {
			for i, f := range []func() error{pooled, raw} {
				start := time.Now()
				for range calls {
					if err := f(); err != nil {
						b.Fatal(err)
					}
				}
				best[i] = min(best[i], time.Since(start))
			}
		}
		nsPooled = float64(best[0].Nanoseconds()) / float64(calls*n)
		nsRaw = float64(best[1].Nanoseconds()) / float64(calls*n)
		b.ReportMetric(nsPooled, "ns/host-call-wqhost")
		b.ReportMetric(nsRaw, "ns/host-call-raw-wazero")
	})
	fmt.Printf("extism host call: wqhost=%.1f ns raw-wazero=%.1f ns (input_load_u64 in a loop; wqhost's module fuel-instrumented)\n", nsPooled, nsRaw)
}
