package runtime

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// fuelLoops are spec-suite style micro loops, the worst cases of the fuel checks: each takes
// n, runs n passes of its loop and returns a value of its work (params beyond n are its
// locals, passed 0).
var fuelLoops = []struct {
	name  string
	funcs []wasmtest.Func // the last is the loop, exported as "run"
}{
	{"count", []wasmtest.Func{{Export: "run", Params: []byte{wasmtest.I32, wasmtest.I32}, Results: []byte{wasmtest.I32}, Body: []byte{
		0x03, 0x40, // loop
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, // n--
		0x0d, 0x00, // br_if 0
		0x0b, 0x20, 0x00, // end, n
	}}}},
	{"nested", []wasmtest.Func{{Export: "run", Params: []byte{wasmtest.I32, wasmtest.I32}, Results: []byte{wasmtest.I32}, Body: []byte{
		0x03, 0x40, // loop $outer
		0x41, 0x10, 0x21, 0x01, // j = 16
		0x03, 0x40, // loop $inner
		0x20, 0x01, 0x41, 0x01, 0x6b, 0x22, 0x01, 0x0d, 0x00, // j--, br_if $inner
		0x0b,                                                       // end
		0x20, 0x00, 0x41, 0x10, 0x6b, 0x22, 0x00, 0x41, 0x00, 0x4a, // n -= 16, n > 0
		0x0d, 0x00, // br_if $outer
		0x0b, 0x20, 0x00, // end, n
	}}}},
	{"call", []wasmtest.Func{
		{Export: "inc", Params: []byte{wasmtest.I32}, Results: []byte{wasmtest.I32}, Body: []byte{0x20, 0x00, 0x41, 0x01, 0x6a}},
		{Export: "run", Params: []byte{wasmtest.I32, wasmtest.I32}, Results: []byte{wasmtest.I32}, Body: []byte{
			0x03, 0x40, // loop
			0x20, 0x01, 0x10, 0x00, 0x21, 0x01, // s = inc(s)
			0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00, // n--, br_if 0
			0x0b, 0x20, 0x01, // end, s
		}}}},
	{"br_table", []wasmtest.Func{{Export: "run", Params: []byte{wasmtest.I32, wasmtest.I32}, Results: []byte{wasmtest.I32}, Body: []byte{
		0x03, 0x40, // loop
		0x02, 0x40, 0x02, 0x40, // block $b1, block $b0
		0x20, 0x00, 0x41, 0x01, 0x71, 0x0e, 0x01, 0x00, 0x01, // br_table $b0 $b1 on n&1
		0x0b,                                     // end $b0: odd passes
		0x20, 0x01, 0x41, 0x03, 0x6a, 0x21, 0x01, // s += 3
		0x0b,                                                 // end $b1
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00, // n--, br_if 0
		0x0b, 0x20, 0x01, // end, s
	}}}},
}

// BenchmarkFuelCost: what the time limit costs, the fuel checks against the same code without
// them in the same run, on the worst cases (fuelLoops: a pass is one iteration of the
// innermost loop) and on the CPU-heavy Go guest (count-vowels-go over 1 KiB through a pool
// with the default 30 s limit, against a pool running the module's own bytes without one: a
// pass is a call). Each op runs both sides once, in turn, so both see the same machine
// load; each case reports the median ratio of the pairs, x-limit/nolimit, and "summary" logs
// `time limit cost tight loop: T×, go heavy: G×` with T the worst of the loops. Run:
//
//	go test -run '^$' -bench FuelCost -count 3 ./runtime/
func BenchmarkFuelCost(b *testing.B) {
	ratios := map[string]float64{}
	for _, l := range fuelLoops {
		mod := wasmtest.Module(l.funcs...)
		yc, err := instrument(mod)
		if err != nil {
			b.Fatal(err)
		}
		const n = 1 << 16
		var runs [2]func()
		for i, wasm := range [][]byte{mod, yc.wasm} {
			run := loopRunner(b, wasm)
			runs[i] = func() {
				if _, err := run.Call(context.Background(), n, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(l.name, func(b *testing.B) { ratios[l.name] = alternate(b, n, runs[0], runs[1]) })
	}
	b.Run("go-heavy", func(b *testing.B) { ratios["go-heavy"] = goHeavy(b) })
	b.Run("summary", func(b *testing.B) {
		for b.Loop() {
		}
		tight := 0.0
		for _, l := range fuelLoops {
			tight = max(tight, ratios[l.name])
		}
		b.ReportMetric(tight, "x-tight")
		b.ReportMetric(ratios["go-heavy"], "x-goheavy")
		b.Logf("time limit cost tight loop: %.2f×, go heavy: %.2f×", tight, ratios["go-heavy"])
	})
}

// loopRunner instantiates wasm (a fuelLoops module, instrumented or not) in a runtime of its
// own, with a yield that only refills, and returns its "run" export.
func loopRunner(b testing.TB, wasm []byte) api.Function {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	b.Cleanup(func() { _ = rt.Close(ctx) })
	_, err := rt.NewHostModuleBuilder(hostModuleName).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { s[0] = fuelRefill }),
			nil, []api.ValueType{api.ValueTypeI32}).Export(yieldImport).Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	m, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	return m.ExportedFunction("run")
}

// goHeavy runs count-vowels-go through two pools, with the fuel time limit and without, and
// returns alternate's ratio.
func goHeavy(b *testing.B) float64 {
	const path = "../examples/handlers/count-vowels-go/count-vowels-go.wasm"
	wasm, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	e := testEngine(b)
	ten, err := e.Tenant("bench", TenantLimits{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := e.Compile(ctx, path, wasm, ABIWqhostV1)
	if err != nil {
		b.Fatal(err)
	}
	plain := *m.c
	plain.fuel = nil // the module's own bytes: a pool without a limit runs them as they are
	text := bytes.Repeat([]byte("The quick brown fox jumps over the lazy dog; a queue of messages waits for its handler. "), 12)[:1024]
	var runs [2]func()
	for i, mod := range []*Module{{name: path, c: &plain}, m} {
		timeout := time.Duration(0)
		if mod == m {
			timeout = 30 * time.Second
		}
		p, err := ten.NewPool(ctx, mod, PoolConfig{Binding: "b", OutputQueue: "out", MinInstances: 1, MaxInstances: 1, Timeout: timeout})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close(context.Background()) })
		if p.v.fuel != (mod == m) {
			b.Fatalf("pool %d: variant %+v", i, p.v)
		}
		in, out := &Input{ID: "m", Body: text}, &Output{}
		runs[i] = func() {
			if err := p.CallInto(ctx, in, out); err != nil || out.Status != StatusOK {
				b.Fatal(fmt.Sprint(out.Status), err)
			}
		}
	}
	return alternate(b, 1, runs[0], runs[1])
}

// alternate runs plain and fueled once per op, in turn (which goes first alternating too),
// and reports the median time per pass of each (passes a run) and the median of their ratio
// op by op, which it returns. Medians of back-to-back pairs, because on a shared machine
// sums and means follow whoever else is running.
func alternate(b *testing.B, passes int, plain, fueled func()) float64 {
	var t [2][]float64
	var x []float64
	i := 0
	for b.Loop() {
		var d [2]time.Duration
		for k := range 2 {
			side := (i + k) % 2 // 0: plain
			start := time.Now()
			if side == 0 {
				plain()
			} else {
				fueled()
			}
			d[side] = time.Since(start)
		}
		t[0] = append(t[0], float64(d[0].Nanoseconds())/float64(passes))
		t[1] = append(t[1], float64(d[1].Nanoseconds())/float64(passes))
		x = append(x, float64(d[1])/float64(max(d[0], 1)))
		i++
	}
	b.ReportMetric(median(t[0]), "ns/pass-nolimit")
	b.ReportMetric(median(t[1]), "ns/pass-limit")
	m := median(x)
	b.ReportMetric(m, "x-limit/nolimit")
	return m
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}
