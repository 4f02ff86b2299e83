package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// BenchmarkE2E drains count-vowels end to end (memory queue, wqhost listener, 4 workers,
// 1 KiB bodies) with the standard-Go handler (examples/handlers/count-vowels-go, the
// default 30 s time limit on) and with Extism's count_vowels in its Go SDK, in alternating
// rounds, keeping each one's best (a drain is slowed by whatever else the machine runs), and
// prints the ratio the target names (>= 5×). -short runs one small round, enough to
// show it still works. Run:
//
//	cd bench && go test -run '^$' -bench E2E
func BenchmarkE2E(b *testing.B) {
	ctx := context.Background()
	p := benchPaths(b)
	rounds, msgs := 3, map[engine.Kind]int{engine.Wqhost: 30000, engine.Extism: 5000}
	if testing.Short() {
		rounds, msgs = 1, map[engine.Kind]int{engine.Wqhost: 2000, engine.Extism: 500}
	}
	best := map[engine.Kind]float64{}
	b.Run("vowels", func(b *testing.B) {
		for b.Loop() {
			// The drains below are the figure (msg/s); b.N is irrelevant.
		}
		for range rounds {
			for _, k := range []engine.Kind{engine.Wqhost, engine.Extism} {
				stores := &suite.Stores{Dir: b.TempDir(), Repo: p.Repo}
				r, err := suite.Run(ctx, stores, p, suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener,
					Engine: k, Logic: engine.Vowels, Messages: msgs[k], Size: 1024, Workers: 4, Push: true, Timeout: 3 * time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				best[k] = max(best[k], r.MsgPerSec)
			}
		}
		g, x := best[engine.Wqhost], best[engine.Extism]
		b.ReportMetric(g, "msg/s-std-go")
		b.ReportMetric(x, "msg/s-extism")
		if g > 0 && x > 0 {
			b.ReportMetric(g/x, "x-e2e-std-go/extism")
			note := "target >= 5×"
			if testing.Short() {
				note = "-short: too few messages for a figure"
			}
			fmt.Printf("e2e vowels std-go vs extism: %.1f× (%.0f msg/s vs %.0f msg/s; %s)\n", g/x, g, x, note)
		}
	})
}
