package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/wqhost/wqhost/bench/internal/drain"
)

// BenchmarkDrain is the local drain comparison as a Go benchmark: 20,000 100-byte messages
// (500 in -short mode) drained by a no-op handler on wqhost's local store, River on SQLite
// and a plain JetStream pull consumer, two alternating rounds, the best of each kept; it
// prints the lines the Performance issue quotes and reports msg/s and wqhost ÷ River as
// metrics. b.N is irrelevant. Run:
//
//	cd bench && go test -run '^$' -bench Drain -benchtime 1x
func BenchmarkDrain(b *testing.B) {
	for b.Loop() {
		// One measurement per run, below.
	}
	o, rounds := drain.Options{Dir: b.TempDir(), Messages: 20000}, 2
	if testing.Short() {
		o.Messages, rounds = 500, 1
	}
	rows, err := drain.Run(context.Background(), o, rounds, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range drain.Lines(rows) {
		fmt.Println(l)
	}
	w, r := drain.Find(rows, "wqhost", false), drain.Find(rows, "river", false)
	b.ReportMetric(w.MsgPerSec, "wqhost-msg/s")
	b.ReportMetric(r.MsgPerSec, "river-msg/s")
	b.ReportMetric(w.MsgPerSec/r.MsgPerSec, "x-wqhost/river")
	if js := drain.Find(rows, "jetstream", true); js != nil {
		b.ReportMetric(js.MsgPerSec, "jetstream-sync-msg/s")
	}
}
