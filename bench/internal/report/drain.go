package report

import (
	"fmt"
	"strings"

	"github.com/wqhost/wqhost/bench/internal/chart"
	"github.com/wqhost/wqhost/bench/internal/drain"
)

// drainLabel names a drain row in the chart and tables.
func drainLabel(x drain.Result) string {
	if strings.HasPrefix(x.Durability, "file store") {
		if strings.Contains(x.Durability, "sync_always") {
			return x.System + " (sync_always)"
		}
		return x.System + " (default sync)"
	}
	return x.System
}

func drainChart(file string, rows []drain.Result) error {
	var series []chart.Series
	for _, x := range rows {
		series = append(series, chart.Series{Name: drainLabel(x), Values: []float64{x.MsgPerSec}})
	}
	return chart.LogBars(file, "Local drain: no-op handler, durable, at least once (higher is better)", "msg/s", []string{"drain"}, series)
}

func drainSection(b *strings.Builder, rows []drain.Result, img func(name, alt string)) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("## Local drain: wqhost vs River vs JetStream\n\n")
	p("One backlog of %d 100-byte messages drained by a no-op handler, durably and at least once (a message is removed only after its handler returned), by each system in turn with the same handler concurrency; the rounds alternate and the best round of each is kept (`bench/internal/drain`, `go run . drain`). Round trips are counted where each system makes them: queue API calls for wqhost (each at most one transaction: the store merges concurrent callers' receives and deletes into one), SQLite commits for the two SQLite stores (a connection hook on the modernc driver counts every commit of the file; under synchronous=FULL each is an fsync), client messages (pull requests and acks) for JetStream.\n\n", rows[0].Messages)
	p("| system | setup | durability | msg/s | round trips/msg | SQLite commits/msg |\n|---|---|---|--:|--:|--:|\n")
	for _, x := range rows {
		commits := "—"
		if x.CommitsPerMsg > 0 {
			commits = fmt.Sprintf("%.4f", x.CommitsPerMsg)
		}
		p("| %s | %s | %s | %.0f | %.3f (%s) | %s |\n", drainLabel(x), x.Setup, x.Durability, x.MsgPerSec, x.CallsPerMsg, x.Calls, commits)
	}
	p("\n```\n%s\n```\n", strings.Join(drain.Lines(rows), "\n"))
	img(ChartDrain, "local drain msg/s by system")
	p("\n")
}
