package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/wqhost/wqhost/bench/internal/drain"
)

func cmdDrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("drain", "Drains one backlog of 100-byte messages with a no-op handler, durably and at least once,\non wqhost's local store, on River (PostgreSQL and SQLite) and with a plain JetStream pull\nconsumer, in alternating rounds (the best of each kept), each round after an fsync probe of\nthe disk, and prints msg/s, round trips per message and each store's disk syncs/s ÷ fsync/s.\nPostgreSQL runs as a throwaway cluster (Debian's postgresql: bash scripts/install-postgres.sh);\nwithout it the River on PostgreSQL row is skipped, saying why.", stderr)
	var o drain.Options
	rounds := fs.Int("rounds", 3, "alternating rounds; the best of each system is kept")
	fs.IntVar(&o.Messages, "messages", 20000, "backlog each system drains")
	fs.IntVar(&o.Workers, "workers", 16, "handler concurrency of wqhost and JetStream (the listener's default max workers)")
	fs.IntVar(&o.RiverWorkers, "river-workers", 2000, "River's MaxWorkers (River's own benchmark runs 2,000)")
	fs.BoolVar(&o.RequirePostgres, "require-postgres", os.Getenv("CI") == "true", "fail, instead of skipping River on PostgreSQL, when PostgreSQL cannot start (default true when CI=true)")
	fs.StringVar(&o.Dir, "data-dir", "", "directory for the stores and the fsync probe (default: a temporary directory)")
	jsonOut := fs.String("json", "", "also write the rows and the fsync rate as JSON to this file")
	systems := fs.String("systems", "", "comma-separated systems to run (default all: wqhost, river-postgres, river-sqlite, jetstream-sync, wqhost-nats-sync, jetstream, wqhost-nats, jetstream-doubleack)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "wqbench-drain-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		o.Dir = d
	}
	o.Systems = splitList(*systems)
	d, err := drain.Run(ctx, o, *rounds, func(s string) { fmt.Fprintln(stderr, "  "+s) })
	if err != nil {
		return err
	}
	printDrain(stdout, d)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*jsonOut, b, 0o644)
	}
	return nil
}

func printDrain(w io.Writer, d drain.Drains) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tmsg/s\tround trips/msg\tcommits/msg\tdisk syncs/msg\tsyncs/s ÷ fsync/s\tdurability\tsetup")
	for _, r := range d.Rows {
		if r.Skipped != "" {
			fmt.Fprintf(tw, "%s\tskipped\t\t\t\t\t\t%s\n", r.System, r.Skipped)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.3f %s\t%s\t%s\t%s\t%s\t%s\n", r.System, r.MsgPerSec, r.CallsPerMsg, r.Calls,
			cell(r.CommitsPerMsg, "%.4f"), cell(r.SyncsPerMsg, "%.4f"), cell(r.SyncRatio(d.Fsync), "%.2f"), r.Durability, r.Setup)
	}
	tw.Flush()
	fmt.Fprintf(w, "fsync probe: %.0f fsyncs/s, the best of %.0f (%d-byte appends, %s)\n", d.Fsync.PerSec, d.Fsync.Probes, d.Fsync.WriteBytes, d.Fsync.Dir)
	if d.LoadStart != "" {
		fmt.Fprintf(w, "load average: %s at the start, %s at the end\n", d.LoadStart, d.LoadEnd)
	}
	for _, l := range drain.Lines(d) {
		fmt.Fprintln(w, l)
	}
}

// cell formats v, or "-" when it was not counted.
func cell(v float64, format string) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}
