package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// BenchmarkExtismPlugin runs Extism's own count_vowels.wasm (the go-sdk's wasm/ folder)
// unchanged in wqhost's pool (abi extism, the default 30 s time limit, fuel-instrumented) and
// in Extism's Go SDK (no time limit), in one run: per call, the ratio of the fastest of
// alternating rounds of each (fastestCalls); end to end, the best of five alternating drains
// of each through a memory queue and the wqhost listener (4 workers). It checks both give
// the same output, and prints the line docs/abi.md and docs/benchmarks.md quote. Run:
//
//	cd bench && go test -run '^$' -bench ExtismPlugin
func BenchmarkExtismPlugin(b *testing.B) {
	ctx := context.Background()
	p := benchPaths(b)
	body := suite.SampleBody(engine.Vowels, 1024)
	callers := map[engine.Kind]engine.Caller{}
	for _, k := range []engine.Kind{engine.WqhostExtism, engine.Extism} {
		c, err := engine.Open(ctx, k, engine.Vowels, 1, p)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		callers[k] = c
	}
	// Same plugin, same answers: the first call of each (the total var starts at 0).
	w, err1 := callers[engine.WqhostExtism].Call(ctx, body)
	x, err2 := callers[engine.Extism].Call(ctx, body)
	if err1 != nil || err2 != nil || !bytes.Equal(w, x) {
		b.Fatalf("outputs differ: wqhost %q (%v), extism go-sdk %q (%v)", w, err1, x, err2)
	}
	ns := map[engine.Kind]float64{}
	for _, k := range []engine.Kind{engine.WqhostExtism, engine.Extism} {
		b.Run("per-call/vowels/"+string(k), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := callers[k].Call(ctx, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("per-call/vowels/ratio", func(b *testing.B) {
		for b.Loop() {
			// The alternating rounds below are the figure; b.N is irrelevant.
		}
		var err error
		ns[engine.WqhostExtism], ns[engine.Extism], err = fastestCalls(ctx, body, callers[engine.WqhostExtism], callers[engine.Extism])
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ns[engine.Extism]/ns[engine.WqhostExtism], "x-extism/wqhost-extism")
	})

	e2e := map[engine.Kind]float64{}
	b.Run("end-to-end/vowels", func(b *testing.B) {
		for b.Loop() {
			// The drains below are the figure (msg/s); b.N is irrelevant.
		}
		for range shortOr(5, 1) {
			for _, k := range []engine.Kind{engine.WqhostExtism, engine.Extism} {
				stores := &suite.Stores{Dir: b.TempDir(), Repo: p.Repo}
				n := shortOr(20000, 2000)
				if k == engine.Extism {
					n = shortOr(4000, 400)
				}
				r, err := suite.Run(ctx, stores, p, suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener,
					Engine: k, Logic: engine.Vowels, Messages: n, Size: 1024, Workers: 4, Push: true, Timeout: 3 * time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				e2e[k] = max(e2e[k], r.MsgPerSec)
			}
		}
		for k, v := range e2e {
			b.ReportMetric(v, "msg/s-"+string(k))
		}
	})

	b.Run("ratios", func(b *testing.B) {
		for b.Loop() {
		}
		w, x := ns[engine.WqhostExtism], ns[engine.Extism]
		ew, ex := e2e[engine.WqhostExtism], e2e[engine.Extism]
		if w > 0 && x > 0 && ew > 0 && ex > 0 {
			fmt.Printf("extism plugin in wqhost vs extism go-sdk, per call: %.1fx; end to end: %.1fx (%.0f ns vs %.0f ns per call; %.0f msg/s vs %.0f msg/s; goal >= 5x end to end)\n",
				x/w, ew/ex, w, x, ew, ex)
			b.ReportMetric(ew/ex, "x-e2e-wqhost-extism/extism")
		}
	})
}

// fastestCalls times a and b in alternating rounds of calls of body and returns each one's
// fastest round in ns per call (see fastestRounds).
func fastestCalls(ctx context.Context, body []byte, a, b engine.Caller) (nsA, nsB float64, err error) {
	const calls = 2000
	rounds := shortOr(10, 2)
	best := [2]time.Duration{1 << 62, 1 << 62}
	for range rounds {
		for i, c := range []engine.Caller{a, b} {
			start := time.Now()
			for range calls {
				if _, err := c.Call(ctx, body); err != nil {
					return 0, 0, err
				}
			}
			best[i] = min(best[i], time.Since(start))
		}
	}
	return float64(best[0].Nanoseconds()) / calls, float64(best[1].Nanoseconds()) / calls, nil
}
