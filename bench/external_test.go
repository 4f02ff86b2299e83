package main

import (
	"testing"

	"github.com/wqhost/wqhost/bench/internal/report"
)

func TestParseTimeLimit(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lines []string
		want  report.TimeLimitCost
	}{
		{"the fuel-cost line", []string{"    fuel_bench_test.go:100: time limit cost tight loop: 1.21×, go heavy: 1.03×"}, report.TimeLimitCost{TightLoop: 1.21, GoHeavy: 1.03}},
		{"tight loop from its two sub-benchmarks", []string{
			"BenchmarkFuelTightLoop/original-2     \t1000000000\t         1.100 ns/op",
			"BenchmarkFuelTightLoop/instrumented-2 \t1000000000\t         2.200 ns/op",
		}, report.TimeLimitCost{TightLoop: 2}},
		{"nothing to read", []string{"ok  \tgithub.com/wqhost/wqhost/runtime\t3.1s"}, report.TimeLimitCost{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := parseTimeLimit(tt.lines)
			if got.TightLoop != tt.want.TightLoop || got.GoHeavy != tt.want.GoHeavy {
				t.Errorf("tight loop %.2f, go heavy %.2f; want %.2f, %.2f", got.TightLoop, got.GoHeavy, tt.want.TightLoop, tt.want.GoHeavy)
			}
		})
	}
}

func TestParseDensity(t *testing.T) {
	rows := parseDensity([]string{
		"goos: linux",
		"density n=1000: ready=1.4s rss=55MiB idle_push_calls_per_hour=0 cold_p50=9.63ms rss_idle=97MiB goroutines=3012",
	})
	want := report.DensityRow{Bindings: 1000, ReadySeconds: 1.4, RSSMiB: 55, ColdP50Ms: 9.63, RSSIdleMiB: 97, Goroutines: 3012}
	if len(rows) != 1 || rows[0] != want {
		t.Errorf("rows %+v, want [%+v]", rows, want)
	}
}
