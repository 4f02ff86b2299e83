package main

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

var (
	pathsOnce sync.Once
	paths     engine.Paths
	pathsErr  error
)

func benchPaths(b *testing.B) engine.Paths {
	pathsOnce.Do(func() {
		paths.Repo, pathsErr = engine.FindRepo(".")
		if pathsErr == nil {
			paths.ExtismWasm, pathsErr = engine.FindExtismWasm(".")
		}
		if pathsErr == nil {
			paths.CacheDir, pathsErr = defaultCacheDir()
		}
	})
	if pathsErr != nil {
		b.Fatal(pathsErr)
	}
	return paths
}

// BenchmarkPerCall times one handler call per op on every engine, for the no-op and the
// count-vowels logic (1 KiB of text), then reports the ratios of Extism's,
// instantiate-per-message and the Go floor against wqhost's pooled dispatch as metrics of a
// final "ratios" sub-benchmark. The target (wqhost >= 20x faster than Extism per call) is
// checked like for like: x-extism/wqhost-notimeout (neither side with a time limit) and
// x-extism-timeout/wqhost (both with one). Run:
//
//	cd bench && go test -run '^$' -bench PerCall
func BenchmarkPerCall(b *testing.B) {
	ctx := context.Background()
	p := benchPaths(b)
	for _, l := range []engine.Logic{engine.Noop, engine.Vowels} {
		body := suite.SampleBody(l, 1024)
		ns := map[engine.Kind]float64{}
		for _, k := range engine.Kinds {
			c, err := engine.Open(ctx, k, l, 1, p)
			if errors.Is(err, engine.ErrUnsupported) {
				continue
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Run(string(l)+"/"+string(k), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Call(ctx, body); err != nil {
						b.Fatal(err)
					}
				}
				// The last (largest) run of a sub-benchmark is the one go test reports.
				ns[k] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			})
			_ = c.Close(ctx)
		}
		b.Run(string(l)+"/ratios", func(b *testing.B) {
			for b.Loop() {
			}
			w := ns[engine.Wqhost]
			if w == 0 {
				b.Skip("wqhost sub-benchmark did not run")
			}
			if ns[engine.Extism] > 0 {
				b.ReportMetric(ns[engine.Extism]/w, "x-extism/wqhost")
				if n := ns[engine.WqhostNoTimeout]; n > 0 {
					// Like for like: neither side with a per-call time limit.
					b.ReportMetric(ns[engine.Extism]/n, "x-extism/wqhost-notimeout")
				}
			}
			if ns[engine.ExtismTimeout] > 0 {
				// Like for like: both sides with a per-call time limit.
				b.ReportMetric(ns[engine.ExtismTimeout]/w, "x-extism-timeout/wqhost")
			}
			if ns[engine.Instantiate] > 0 {
				b.ReportMetric(ns[engine.Instantiate]/w, "x-instantiate/wqhost")
			}
			if ns[engine.Go] > 0 {
				b.ReportMetric(w/ns[engine.Go], "x-wqhost/go")
			}
			if ns[engine.WqhostRust] > 0 && ns[engine.Extism] > 0 {
				b.ReportMetric(ns[engine.Extism]/ns[engine.WqhostRust], "x-extism/wqhost-rust")
			}
		})
	}
}

// shortOr is full, or smoke in -short mode: CI runs every benchmark once to catch one that
// no longer builds or runs, and needs no figure from it.
func shortOr(full, smoke int) int {
	if testing.Short() {
		return smoke
	}
	return full
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }
