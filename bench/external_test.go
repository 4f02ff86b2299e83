package main

import (
	"slices"
	"testing"

	"github.com/wqhost/wqhost/bench/internal/report"
)

func TestParseTimeLimit(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lines []string
		want  report.TimeLimitCost
	}{
		{"the fuel-cost line and go heavy's case", []string{
			`time limit cost: realistic max=1.08 micro max=1.21 cpu="AMD EPYC"`,
			"BenchmarkFuelCost/go-heavy-2      \t   100\t     83000 ns/op\t     43429 ns/pass-limit\t     40355 ns/pass-nolimit\t    1.097 x-highest-placement\t    1.03 x-limit/nolimit\t    1.093 x-lowest-placement",
		}, report.TimeLimitCost{TightLoop: 1.21, Realistic: 1.08, GoHeavy: 1.03, Cases: []report.TimeLimitCase{{Name: "go-heavy", Ratio: 1.03}}}},
		{"each case's median over the runs, in order", []string{
			"BenchmarkFuelCost/count-2         \t   38768\t     31551 ns/op\t         0.2344 ns/pass-limit\t         0.2323 ns/pass-nolimit\t         1.008 x-limit/nolimit",
			"BenchmarkFuelCost/go-byte-loop-2  \t   100\t     83000 ns/op\t     43429 ns/pass-limit\t     40355 ns/pass-nolimit\t    1.097 x-highest-placement\t    1.096 x-limit/nolimit\t    1.093 x-lowest-placement",
			"BenchmarkFuelCost/count-2         \t   38005\t     31660 ns/op\t         0.2330 ns/pass-limit\t         0.2311 ns/pass-nolimit\t         1.020 x-limit/nolimit",
			"BenchmarkFuelCost/count-2         \t   37500\t     32106 ns/op\t         0.2335 ns/pass-limit\t         0.2315 ns/pass-nolimit\t         1.007 x-limit/nolimit",
			"BenchmarkFuelCost/summary-2       \t1000000000\t         0.4730 ns/op\t         1.063 x-goheavy\t         1.023 x-tight",
		}, report.TimeLimitCost{Cases: []report.TimeLimitCase{{Name: "count", Ratio: 1.008}, {Name: "go-byte-loop", Ratio: 1.096}}}},
		{"nothing to read", []string{"ok  \tgithub.com/wqhost/wqhost/runtime\t3.1s"}, report.TimeLimitCost{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := parseTimeLimit(tt.lines)
			if got.TightLoop != tt.want.TightLoop || got.Realistic != tt.want.Realistic || got.GoHeavy != tt.want.GoHeavy {
				t.Errorf("micro %.2f, realistic %.2f, go heavy %.2f; want %.2f, %.2f, %.2f", got.TightLoop, got.Realistic, got.GoHeavy, tt.want.TightLoop, tt.want.Realistic, tt.want.GoHeavy)
			}
			if !slices.Equal(got.Cases, tt.want.Cases) {
				t.Errorf("cases %+v, want %+v", got.Cases, tt.want.Cases)
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
