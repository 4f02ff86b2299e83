package runtime

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/internal/wasmtest"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// BenchmarkFuelCost: what the time limit costs, the fuel checks against the same code without
// them in the same run, in two kinds of case.
//
// The micro loops are the worst cases of the checks: wasmtest.LoopModules (a pass is one iteration of
// the innermost loop) and go-byte-loop, a standard-Go loop over 16 KiB doing one table
// lookup a pass (the guest fixture's "bytes"), each pass through the function's jump table
// and its check. Each is measured against its code rewritten as the instrumenter rewrites it
// (small loops unrolled, calls to the copies of small functions) but with no check, charge,
// spill or reload (fuel.Options.Bare): what unrolling gains is not netted against what
// the checks cost.
//
// The realistic guests are the example handlers on their usual work: billing (standard Go and
// TinyGo) on a transaction of eight items, the per-char vowel counters (standard Go, TinyGo
// and Rust: Extism's algorithm) and go-heavy (count-vowels-go, the table-driven handler) on
// 1 KiB of text. Each is measured against the module as it was compiled, with no rewriting
// but the code placement (noChecks): what a user of the module pays for the time limit.
//
// The guests run through pools, with the default 30 s limit and without one, under several
// code placements (goGuest); a pass is a call. Each op runs both sides once, in turn, so both
// see the same machine load; each case reports the median ratio of the pairs,
// x-limit/nolimit, and the benchmark ends printing
// `time limit cost: realistic max=R micro max=M cpu="<model>"`, the worst case of each kind
// (its median over the runs) on the CPU /proc/cpuinfo names (the checks' cost depends on
// the CPU). Run:
//
//	go test -run '^$' -bench '^BenchmarkFuelCost$' -count 3 ./runtime/
func BenchmarkFuelCost(b *testing.B) {
	// Each case's ratios, one per run (-count runs each case that many times in one call).
	micro, realistic := map[string][]float64{}, map[string][]float64{}
	for _, l := range wasmtest.LoopModules {
		mod := wasmtest.Module(l.Funcs...)
		bare, err := fuel.InstrumentWith(mod, fuel.Options{Segment: fuel.SegmentBytes, Fuel: fuel.Refill, Unroll: fuel.UnrollCopies, Bare: true})
		if err != nil {
			b.Fatal(err)
		}
		yc, err := instrumentRecovered(mod)
		if err != nil {
			b.Fatal(err)
		}
		const n = 1 << 16
		var runs [2]func()
		for i, wasm := range [][]byte{bare, yc.wasm} {
			run := loopRunner(b, wasm)
			runs[i] = func() {
				if _, err := run.Call(context.Background(), n, 0); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.Run(l.Name, func(b *testing.B) { micro[l.Name] = append(micro[l.Name], placed(b, n, [][2]func(){runs})) })
	}
	text := bytes.Repeat([]byte("The quick brown fox jumps over the lazy dog; a queue of messages waits for its handler. "), 200)
	b.Run("go-byte-loop", func(b *testing.B) {
		micro["go-byte-loop"] = append(micro["go-byte-loop"], goGuest(b, "testdata/guest/guest.wasm", append([]byte("bytes:"), text[:16<<10]...), true))
	})
	tx := []byte(`{"id":"tx-1","account":"acme","currency":"EUR","items":[` +
		strings.Repeat(`{"sku":"sku-1234","quantity":3,"unit_price":2.5},`, 7) +
		`{"sku":"sku-9","quantity":1,"unit_price":0.1}]}`)
	for _, g := range []struct{ name, path string }{
		{"billing-go", "billing-go"},
		{"billing-tinygo", "billing-tinygo"},
		{"vowels-perchar-go", "count-vowels-perchar-go"},
		{"vowels-perchar-tinygo", "count-vowels-perchar-tinygo"},
		{"vowels-rust", "count-vowels-rust"},
		{"go-heavy", "count-vowels-go"},
	} {
		body := text[:1<<10]
		if strings.HasPrefix(g.name, "billing") {
			body = tx
		}
		b.Run(g.name, func(b *testing.B) {
			realistic[g.name] = append(realistic[g.name], goGuest(b, "../examples/handlers/"+g.path+"/"+g.path+".wasm", body, false))
		})
	}
	// After the cases' result lines, on a line of its own (a sub-benchmark's output follows
	// its name on the same line): the worst case's median over the runs.
	worst := func(m map[string][]float64) float64 {
		w := 0.0
		for _, r := range m {
			w = max(w, median(r))
		}
		return w
	}
	fmt.Printf("time limit cost: realistic max=%.2f micro max=%.2f cpu=%q\n", worst(realistic), worst(micro), cpuModel())
}

// cpuModel is the first "model name" of /proc/cpuinfo, or GOARCH where there is none.
func cpuModel() string {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return goruntime.GOARCH
}

// loopRunner instantiates wasm (a wasmtest.LoopModules module, instrumented or not) in a runtime of its
// own, with a yield that only refills, and returns its "run" export.
func loopRunner(b testing.TB, wasm []byte) api.Function {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	b.Cleanup(func() { _ = rt.Close(ctx) })
	_, err := rt.NewHostModuleBuilder(hostModuleName).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { s[0] = fuel.Refill }),
			nil, []api.ValueType{api.ValueTypeI32}).Export(fuel.YieldImport).Instantiate(ctx)
	if err != nil {
		b.Fatal(err)
	}
	m, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	return m.ExportedFunction("run")
}

// goGuest runs the guest at path on body through pools with the fuel time limit (the
// default 30 s) and without, each side under several code placements, and returns placed's
// ratio. The side without the limit runs the module with no check (noChecks), or with bare
// its rewritten code without the checks (fuel.Options.Bare).
//
// Why placements: where the compiled code of the hot loop lands (its offset from a cache
// line, which branches share a predictor entry) moves a guest's speed by about as much as
// the checks cost. Adding one to eight charges to go_buildid, a function never called, with
// no other check anywhere, measured count-vowels-go's former byte loop at 0.97× to 1.10×
// against the module's own bytes. So both sides are built under the same placements, the
// module rewritten with pad charges in that function, one side with the checks and one
// without any (fuel.Options), and the cost is the geometric mean over placements of
// each one's ratio.
func goGuest(b *testing.B, path string, body []byte, bare bool) float64 {
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
	// Four placements: each is two compilations of the module, and -count 3 of the whole
	// benchmark must end within go test's default 10 minutes on a cold cache.
	placements := 4
	if testing.Short() {
		placements = 1 // CI runs each benchmark once, to see that it works
	}
	pairs := make([][2]func(), placements)
	for pad := range placements {
		for side, noChecks := range []bool{true, false} {
			opt := fuel.Options{Segment: fuel.SegmentBytes, Fuel: fuel.Refill, Unroll: fuel.UnrollCopies, Pad: pad, NoChecks: noChecks && !bare, Bare: noChecks && bare}
			yc, err := fuel.InstrumentWith(wasm, opt)
			if err != nil {
				b.Fatal(err)
			}
			c := *m.c
			c.digest = fmt.Sprintf("%s-pad%d-side%d", c.digest, pad, side)
			timeout := 30 * time.Second
			if noChecks {
				c.wasm, c.fuel, timeout = yc, nil, 0 // without a limit the pool runs c.wasm
			} else {
				c.fuel = &yieldCode{wasm: yc}
			}
			p, err := ten.NewPool(ctx, &Module{name: path, c: &c}, PoolConfig{Binding: "b", OutputQueue: "out", MinInstances: 1, MaxInstances: 1, Timeout: timeout})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = p.Close(context.Background()) })
			if p.v.fuel == noChecks {
				b.Fatalf("placement %d side %d: variant %+v", pad, side, p.v)
			}
			in, out := &Input{ID: "m", Body: body}, &Result{}
			pairs[pad][side] = func() {
				if err := p.CallInto(ctx, in, out); err != nil || out.Verdict != VerdictOK {
					b.Fatal(fmt.Sprint(out.Verdict), err)
				}
			}
		}
	}
	return placed(b, 1, pairs)
}

// placed runs each placement's pair (0: the code without the limit, 1: with it) once per
// op, in turn: op i runs the pair of placement i mod len(pairs), and which side goes first
// alternates. Per placement it takes the medians of the time per pass (passes a run) of each
// side and of the two sides' ratio op by op: medians of back-to-back pairs, because on a
// shared machine sums and means follow whoever else is running. It reports the geometric
// means of those over the placements, and the lowest and highest placement's ratio (with
// more than one, goGuest), and returns the mean ratio.
func placed(b *testing.B, passes int, pairs [][2]func()) float64 {
	n := len(pairs)
	t := make([][2][]float64, n)
	x := make([][]float64, n)
	i := 0
	for b.Loop() {
		p := i % n
		var d [2]time.Duration
		for k := range 2 {
			side := (i/n + k) % 2 // which side goes first alternates too
			start := time.Now()
			pairs[p][side]()
			d[side] = time.Since(start)
		}
		for side := range 2 {
			t[p][side] = append(t[p][side], float64(d[side].Nanoseconds())/float64(passes))
		}
		x[p] = append(x[p], float64(d[1])/float64(max(d[0], 1)))
		i++
	}
	var logT [2]float64
	logX, lo, hi := 0.0, math.Inf(1), 0.0
	for p := range n {
		if len(x[p]) == 0 { // fewer ops than placements
			n = p
			break
		}
		for side := range 2 {
			logT[side] += math.Log(median(t[p][side]))
		}
		r := median(x[p])
		logX += math.Log(r)
		lo, hi = min(lo, r), max(hi, r)
	}
	if n == 0 {
		return 0
	}
	b.ReportMetric(math.Exp(logT[0]/float64(n)), "ns/pass-nolimit")
	b.ReportMetric(math.Exp(logT[1]/float64(n)), "ns/pass-limit")
	if n > 1 {
		b.ReportMetric(lo, "x-lowest-placement")
		b.ReportMetric(hi, "x-highest-placement")
	}
	m := math.Exp(logX / float64(n))
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
