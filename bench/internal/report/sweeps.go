package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/wqhost/wqhost/bench/internal/chart"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// The sweeps show how cost grows with the work beside an ideal line drawn from the sweep's
// first point: throughput growing in step with the workers, cost per message growing no
// faster than the body, memory and start time growing in step with the bindings.

// idealFrom is the line through (x0, y0) proportional to x: y0·x/x0.
func idealFrom(name string, xs []float64, x0, y0 float64) chart.Line {
	l := chart.Line{Name: name, Ideal: true}
	for _, x := range xs {
		l.X, l.Y = append(l.X, x), append(l.Y, y0*x/x0)
	}
	return l
}

// scalingChart: msg/s against max workers per backend, with linear scaling from the fewest
// workers measured.
func scalingChart(file string, rows []suite.RunResult) error {
	var lines []chart.Line
	var ticks []float64
	for _, b := range suite.Backends {
		l := chart.Line{Name: string(b)}
		for _, x := range rows {
			if x.Backend == b {
				l.X, l.Y = append(l.X, float64(x.Workers)), append(l.Y, x.MsgPerSec)
				if !slices.Contains(ticks, float64(x.Workers)) {
					ticks = append(ticks, float64(x.Workers))
				}
			}
		}
		if len(l.X) == 0 {
			continue
		}
		lines = append(lines, l, idealFrom(string(b)+" ideal (linear in workers)", l.X, l.X[0], l.Y[0]))
	}
	slices.Sort(ticks)
	label := func(x float64) string { return strconv.Itoa(int(x)) }
	return chart.Lines(file, "Scaling: msg/s against max workers (no-op handler on wqhost)", "max workers", "msg/s", ticks, label, true, lines)
}

// sizesChart: cost per message against body size per handler, with cost growing linearly
// with the body from the smallest size measured.
func sizesChart(file string, rows []suite.RunResult) error {
	var lines []chart.Line
	var ticks []float64
	for _, lg := range engine.Logics {
		l := chart.Line{Name: string(lg) + " handler"}
		for _, x := range rows {
			if x.Logic == lg && x.MsgPerSec > 0 {
				l.X, l.Y = append(l.X, float64(x.Size)), append(l.Y, 1e6/x.MsgPerSec)
				if !slices.Contains(ticks, float64(x.Size)) {
					ticks = append(ticks, float64(x.Size))
				}
			}
		}
		if len(l.X) == 0 {
			continue
		}
		lines = append(lines, l, idealFrom(string(lg)+" ideal (linear in size)", l.X, l.X[0], l.Y[0]))
	}
	slices.Sort(ticks)
	label := func(x float64) string { return size(int(x)) }
	return chart.Lines(file, "Message size sweep, local backend: cost per message (lower is better)", "message size", "µs per message", ticks, label, true, lines)
}

// densityChart: resident memory after start and after the idle wait against bindings, with
// memory growing linearly with the bindings from the fewest measured.
func densityChart(file string, rows []DensityRow) error {
	var ticks []float64
	rss, idle := chart.Line{Name: "RSS after start"}, chart.Line{Name: "RSS after the idle wait"}
	for _, x := range rows {
		n := float64(x.Bindings)
		ticks = append(ticks, n)
		rss.X, rss.Y = append(rss.X, n), append(rss.Y, x.RSSMiB)
		idle.X, idle.Y = append(idle.X, n), append(idle.Y, x.RSSIdleMiB)
	}
	slices.Sort(ticks)
	label := func(x float64) string { return strconv.Itoa(int(x)) }
	lines := []chart.Line{rss, idealFrom("ideal (linear in bindings)", rss.X, rss.X[0], rss.Y[0])}
	if !slices.Contains(idle.Y, 0) {
		lines = append(lines, idle)
	}
	return chart.Lines(file, "Density: resident memory against bindings", "bindings", "MiB", ticks, label, true, lines)
}

// vsIdeal formats measured ÷ ideal.
func vsIdeal(measured, ideal float64) string {
	if ideal <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", measured/ideal)
}

func scalingSection(b *strings.Builder, rows []suite.RunResult, img func(name, alt string)) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## Scaling curve\n\n")
	p("msg/s against the listener's max workers, no-op wqhost handler, 256 B messages. With a backlog the target scaler (32 messages per worker) runs every allowed worker. The ideal is throughput growing in step with the workers from the fewest measured (the dashed lines); *of ideal* is measured ÷ ideal. On two cores the curve flattens early: the store (SQLite with synchronous=FULL, or Azurite, a single Node.js process on the same cores) is the limit, not the number of workers.\n\n")
	p("| backend | workers | msg/s | ideal msg/s | of ideal | queue calls/msg | CPU |\n|---|--:|--:|--:|--:|--:|--:|\n")
	first := map[suite.Backend]suite.RunResult{}
	for _, x := range rows {
		f, ok := first[x.Backend]
		if !ok {
			f, first[x.Backend] = x, x
		}
		ideal := f.MsgPerSec * float64(x.Workers) / float64(f.Workers)
		p("| %s | %d | %.0f | %.0f | %s | %.3f | %.0f%% |\n", x.Backend, x.Workers, x.MsgPerSec, ideal, vsIdeal(x.MsgPerSec, ideal), x.CallsPerMsg, x.CPUPercent)
	}
	p("\n")
	runTable(b, rows, false)
	img(ChartScaling, "msg/s against max workers, with the ideal")
	p("\n")
}

func sizesSection(b *strings.Builder, rows []suite.RunResult, img func(name, alt string)) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## Message size sweep\n\n")
	p("Local backend, wqhost listener with 4 workers, no-op and count-vowels handlers. The no-op handler never reads the body, so its curve is the store's; count-vowels reads and scans every byte inside the sandbox. Cost per message is 1 ÷ msg/s; the ideal grows linearly with the body from the smallest size (the dashed lines): *of ideal* below 1 means the fixed cost per message still dominates, above 1 that the cost grows faster than the bytes.\n\n")
	p("| handler | size | msg/s | cost per message | linear from the smallest | of ideal |\n|---|--:|--:|--:|--:|--:|\n")
	first := map[engine.Logic]suite.RunResult{}
	for _, x := range rows {
		if x.MsgPerSec <= 0 {
			continue
		}
		f, ok := first[x.Logic]
		if !ok {
			f, first[x.Logic] = x, x
		}
		cost, ideal := 1e9/x.MsgPerSec, 1e9/f.MsgPerSec*float64(x.Size)/float64(f.Size)
		p("| %s | %s | %.0f | %s | %s | %s |\n", x.Logic, size(x.Size), x.MsgPerSec, ns(cost), ns(ideal), vsIdeal(cost, ideal))
	}
	p("\n")
	runTable(b, rows, false)
	img(ChartSizes, "cost per message against message size, with the ideal")
	p("\n")
}

func densitySection(b *strings.Builder, rows []DensityRow, img func(name, alt string)) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## Bindings sweep (density)\n\n")
	p("host's `BenchmarkDensity` (`host/density_bench_test.go`): a host with N bindings of `builtin:echo-tinygo` over N/100 tenants on the local backend with push wake-ups, started, left idle, then one cold message to up to 50 bindings. The ideal grows in step with the bindings from the fewest measured (the dashed line); *of ideal* is measured ÷ ideal.\n\n")
	p("| bindings | ready | RSS after start | ideal RSS | of ideal | RSS after idle | cold p50 | idle calls/hour | goroutines |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, x := range rows {
		ideal := rows[0].RSSMiB * float64(x.Bindings) / float64(rows[0].Bindings)
		p("| %d | %.1f s | %.0f MiB | %.0f MiB | %s | %.0f MiB | %.2f ms | %.0f | %d |\n", x.Bindings, x.ReadySeconds, x.RSSMiB, ideal, vsIdeal(x.RSSMiB, ideal), x.RSSIdleMiB, x.ColdP50Ms, x.IdleCallsPerHour, x.Goroutines)
	}
	img(ChartDensity, "resident memory against bindings, with the ideal")
	p("\n")
}
