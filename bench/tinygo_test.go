package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
	wqruntime "github.com/wqhost/wqhost/runtime"
)

// BenchmarkTinyGo compares the TinyGo builds of the example handlers (pool with the default
// 30 s time limit) with Extism's Go SDK in one run: per call for noop, vowels and billing;
// pooled TinyGo noop against a raw wazero call of the same export (no pool, no time limit:
// the floor); and vowels end to end (memory queue, wqhost listener, 4 workers) against
// Extism's count_vowels. It prints the ratios the docs quote. Run:
//
//	cd bench && go test -run '^$' -bench TinyGo
func BenchmarkTinyGo(b *testing.B) {
	ctx := context.Background()
	p := benchPaths(b)
	ns := map[string]float64{}
	for _, l := range engine.Logics {
		body := suite.SampleBody(l, 1024)
		for _, k := range []engine.Kind{engine.WqhostTinyGo, engine.Wqhost, engine.Extism} {
			c, err := engine.Open(ctx, k, l, 1, p)
			if err != nil {
				continue // no module for this pair (Extism has no billing plugin)
			}
			b.Run(fmt.Sprintf("per-call/%s/%s", l, k), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Call(ctx, body); err != nil {
						b.Fatal(err)
					}
				}
				ns[string(l)+"/"+string(k)] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			})
			_ = c.Close(ctx)
		}
	}
	b.Run("per-call/noop/raw-wazero-tinygo", func(b *testing.B) {
		ns["noop/raw"] = rawWazeroNoop(b, p)
	})
	b.Run("per-call/noop/pooled-tinygo", func(b *testing.B) {
		ns["noop/pooled"] = pooledNoop(b, p)
	})

	e2e := map[engine.Kind]float64{}
	for _, k := range []engine.Kind{engine.WqhostTinyGo, engine.Extism} {
		b.Run("end-to-end/vowels/"+string(k), func(b *testing.B) {
			for b.Loop() {
				// One drain per op; its rate is the figure (msg/s), b.N is irrelevant.
			}
			stores := &suite.Stores{Dir: b.TempDir(), Repo: p.Repo}
			n := 20000
			if k == engine.Extism {
				n = 4000
			}
			r, err := suite.Run(ctx, stores, p, suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener,
				Engine: k, Logic: engine.Vowels, Messages: n, Size: 1024, Workers: 4, Push: true, Timeout: 3 * time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			e2e[k] = r.MsgPerSec
			b.ReportMetric(r.MsgPerSec, "msg/s")
		})
	}

	b.Run("ratios", func(b *testing.B) {
		for b.Loop() {
		}
		for _, l := range engine.Logics {
			if t, x := ns[string(l)+"/wqhost-tinygo"], ns[string(l)+"/extism"]; t > 0 && x > 0 {
				fmt.Printf("tinygo %s per call vs extism: %.1f× (%.0f ns vs %.0f ns)\n", l, x/t, t, x)
			}
			if t, g := ns[string(l)+"/wqhost-tinygo"], ns[string(l)+"/wqhost"]; t > 0 && g > 0 {
				fmt.Printf("tinygo %s per call vs standard Go: %.1f× (%.0f ns vs %.0f ns)\n", l, g/t, t, g)
			}
		}
		if t, r := ns["noop/pooled"], ns["noop/raw"]; t > 0 && r > 0 {
			fmt.Printf("pooled tinygo noop vs raw wazero call: %.2f× (%.0f ns vs %.0f ns; target <= 2×)\n", t/r, t, r)
			b.ReportMetric(t/r, "x-pooled/raw")
		}
		if t, x := e2e[engine.WqhostTinyGo], e2e[engine.Extism]; t > 0 && x > 0 {
			fmt.Printf("tinygo vowels end to end vs extism: %.1f× (%.0f msg/s vs %.0f msg/s; target >= 5×)\n", t/x, t, x)
			b.ReportMetric(t/x, "x-e2e-tinygo/extism")
		}
	})
}

// pooledNoop times noop-tinygo through a wqhost pool as the host runs it (the default 30 s
// time limit, fuel-instrumented), called the way rawWazeroNoop calls wazero: one caller in
// a loop owning its Input and Output (Pool.CallInto), as a listener worker does. It returns
// ns per call.
func pooledNoop(b *testing.B, p engine.Paths) float64 {
	ctx := context.Background()
	path, err := p.ModulePath(engine.Noop, engine.WqhostTinyGo)
	if err != nil {
		b.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	e, err := wqruntime.NewEngine(ctx, wqruntime.EngineConfig{CacheDir: p.CacheDir})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(ctx)
	m, err := e.Compile(ctx, path, wasm, wqruntime.ABIWqhostV1)
	if err != nil {
		b.Fatal(err)
	}
	t, err := e.Tenant("bench", wqruntime.TenantLimits{})
	if err != nil {
		b.Fatal(err)
	}
	pool, err := t.NewPool(ctx, m, wqruntime.PoolConfig{Binding: "bench", OutputQueue: "out",
		MinInstances: 1, MaxInstances: 1, Timeout: 30 * time.Second}) // the host's default limit
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close(ctx)
	in, out := &wqruntime.Input{ID: "bench", Queue: "bench", Body: suite.SampleBody(engine.Noop, 1024)}, &wqruntime.Output{}
	b.ReportAllocs()
	for b.Loop() {
		if err := pool.CallInto(ctx, in, out); err != nil || out.Status != wqruntime.StatusOK {
			b.Fatal(out.Status, err)
		}
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// rawWazeroNoop times a bare wazero call of noop-tinygo's wqhost_handle: one instance, host
// functions that do nothing, no pool, no time limit. It returns ns per call.
func rawWazeroNoop(b *testing.B, p engine.Paths) float64 {
	ctx := context.Background()
	path, err := p.ModulePath(engine.Noop, engine.WqhostTinyGo)
	if err != nil {
		b.Fatal(err)
	}
	wasm, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	// Every wqhost import as a stub returning zeros: noop reads nothing.
	hb := rt.NewHostModuleBuilder("wqhost")
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != "wqhost" {
			continue
		}
		results := f.ResultTypes()
		hb.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) {
			for i := range results {
				s[i] = 0
			}
		}), f.ParamTypes(), results).Export(name)
	}
	if _, err := hb.Instantiate(ctx); err != nil {
		b.Fatal(err)
	}
	mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithStartFunctions("_initialize"))
	if err != nil {
		b.Fatal(err)
	}
	fn := mod.ExportedFunction("wqhost_handle")
	stack := make([]uint64, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := fn.CallWithStack(ctx, stack); err != nil {
			b.Fatal(err)
		}
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}
