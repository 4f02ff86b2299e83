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
		if x.Skipped == "" {
			series = append(series, chart.Series{Name: drainLabel(x), Values: []float64{x.MsgPerSec}})
		}
	}
	return chart.LogBars(file, "Local drain: no-op handler, durable, at least once (higher is better)", "msg/s", []string{"drain"}, series)
}

func drainSection(b *strings.Builder, rows []drain.Result, fsync *drain.Fsync, load []string, img func(name, alt string)) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	var f drain.Fsync
	if fsync != nil {
		f = *fsync
	}
	messages := 0
	for _, x := range rows {
		messages = max(messages, x.Messages)
	}
	p("## Local drain: wqhost vs River (PostgreSQL, SQLite) vs JetStream\n\n")
	p("One backlog of %d 100-byte messages drained by a no-op handler, durably and at least once (a message is removed only after its handler returned), by each system in turn; the rounds alternate and the best round of each is kept (`bench/internal/drain`, `go run . drain`). wqhost runs its listener's defaults (16 workers at most); River runs as its own benchmark (`river bench`) runs it: 2,000 workers, 2 ms fetch cooldown, 20 ms poll interval, on PostgreSQL (where its users run it: `riverpgxv5`, a throwaway cluster started by the benchmark on a loopback port, fsync and synchronous_commit on) and on SQLite (`riversqlite` with the local store's driver and pragmas, one connection). Round trips are counted where each system makes them: queue API calls for wqhost (each at most one transaction: the store merges concurrent callers' receives and deletes into one), SQLite commits for the two SQLite stores (a connection hook on the modernc driver counts every commit of the file; under synchronous=FULL each is an fsync), committed transactions and WAL flushes from PostgreSQL's statistics (`pg_stat_database.xact_commit`, `pg_stat_wal.wal_sync`; concurrent commits share a flush), client messages (pull requests and acks) for JetStream.\n\n", messages)
	if len(load) == 2 {
		p("The drains ran at load average %s (1, 5, 15 min) at their start and %s at their end, on two cores.\n\n", load[0], load[1])
	}
	if f.PerSec > 0 {
		p("**What bounds each store.** Before each drain the disk is measured: appends of %d bytes, each fsynced, in the drains' directory, for a second; the best probe gave **%.0f fsyncs/s** (every probe's: %s; the disk is shared with other work, so they vary, and the best is the ceiling least flattering to a store; a store above 1 ran while the disk was faster than at any probe). *Disk syncs/s ÷ fsync/s* is the share of that rate a store used: near 1 the disk is its limit; far below 1 its own CPU cost per message is (on two cores shared by the store, the benchmark and, for PostgreSQL, the server). For wqhost it is the `ceiling-ratio`: its msg/s over what the disk would allow at its messages per disk sync. In this run: %s. River documents its SQLite driver as in early testing and as completing and inserting jobs one row at a time, slower than its Postgres driver; on Postgres it reports about 46k jobs/s with 2,000 workers on an 8-core laptop ([River's benchmarks](https://riverqueue.com/docs/benchmarks)).\n\n", f.WriteBytes, f.PerSec, probeList(f.Probes), boundBy(rows, f))
	}
	p("| system | setup | durability | msg/s | round trips/msg | commits/msg | disk syncs/msg | disk syncs/s ÷ fsync/s |\n|---|---|---|--:|--:|--:|--:|--:|\n")
	for _, x := range rows {
		if x.Skipped != "" {
			p("| %s | skipped: %s | | — | — | — | — | — |\n", drainLabel(x), x.Skipped)
			continue
		}
		commits, syncs, ratio := "—", "—", "—"
		if x.CommitsPerMsg > 0 {
			commits = fmt.Sprintf("%.4f", x.CommitsPerMsg)
		}
		if x.SyncsPerMsg > 0 {
			syncs = fmt.Sprintf("%.4f", x.SyncsPerMsg)
			if r := x.SyncRatio(f); r > 0 {
				ratio = fmt.Sprintf("%.2f", r)
			}
		}
		p("| %s | %s | %s | %.0f | %.3f (%s) | %s | %s | %s |\n", drainLabel(x), x.Setup, x.Durability, x.MsgPerSec, x.CallsPerMsg, x.Calls, commits, syncs, ratio)
	}
	p("\n```\n%s\n```\n", strings.Join(drain.Lines(drain.Drains{Rows: rows, Fsync: f}), "\n"))
	img(ChartDrain, "local drain msg/s by system")
	p("\n")
}

func probeList(rates []float64) string {
	var s []string
	for _, r := range rates {
		s = append(s, fmt.Sprintf("%.0f", r))
	}
	return strings.Join(s, ", ")
}

// boundBy says, for each store whose disk syncs were counted, the share of the disk's fsync
// rate it used and so what bounds it.
func boundBy(rows []drain.Result, f drain.Fsync) string {
	var out []string
	for _, x := range rows {
		r := x.SyncRatio(f)
		if r <= 0 {
			continue
		}
		what := "not the disk"
		if r >= 0.5 {
			what = "near the disk's limit"
		}
		out = append(out, fmt.Sprintf("%s used %.3f of the disk's fsyncs (%.4f syncs per message): %s", x.System, r, x.SyncsPerMsg, what))
	}
	if len(out) == 0 {
		return "no store's disk syncs were counted"
	}
	return strings.Join(out, "; ")
}
