package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/wqhost/wqhost/bench/internal/drain"
)

// BenchmarkDrain is the local drain comparison as a Go benchmark: 20,000 100-byte messages
// (500 in -short mode) drained by a no-op handler on wqhost's local store, River on
// PostgreSQL and on SQLite, and a plain JetStream pull consumer, two alternating rounds
// after an fsync probe each, the best of each kept; it prints the lines the Truth issue
// quotes and reports msg/s, wqhost ÷ River and the fsync rate as metrics. b.N is
// irrelevant. River on PostgreSQL is skipped, saying why, where PostgreSQL cannot start,
// except in CI (CI=true), where that fails the benchmark. Run:
//
//	cd bench && go test -run '^$' -bench Drain -benchtime 1x
func BenchmarkDrain(b *testing.B) {
	for b.Loop() {
		// One measurement per run, below.
	}
	o, rounds := drain.Options{Dir: b.TempDir(), Messages: 20000, RequirePostgres: os.Getenv("CI") == "true"}, 2
	if testing.Short() {
		o.Messages, rounds, o.ProbeTime, o.Timeout = 500, 1, 200*time.Millisecond, 2*time.Minute
	}
	d, err := drain.Run(context.Background(), o, rounds, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range drain.Lines(d) {
		fmt.Println(l)
	}
	w := drain.Find(d.Rows, "wqhost", false)
	b.ReportMetric(w.MsgPerSec, "wqhost-msg/s")
	b.ReportMetric(d.Fsync.PerSec, "fsync/s")
	b.ReportMetric(w.SyncRatio(d.Fsync), "ceiling-ratio")
	for _, name := range []string{"river-postgres", "river-sqlite"} {
		if r := drain.Find(d.Rows, name, false); r != nil && r.Skipped == "" {
			b.ReportMetric(r.MsgPerSec, name+"-msg/s")
			b.ReportMetric(w.MsgPerSec/r.MsgPerSec, "x-wqhost/"+name)
		}
	}
	if js := drain.Find(d.Rows, "jetstream", true); js != nil {
		b.ReportMetric(js.MsgPerSec, "jetstream-sync-msg/s")
	}
}
