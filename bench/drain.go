package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/wqhost/wqhost/bench/internal/drain"
)

func cmdDrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("drain", "Drains one backlog of 100-byte messages with a no-op handler, durably and at least once,\non wqhost's local store, on River (SQLite) and with a plain JetStream pull consumer, in\nalternating rounds (the best of each kept), and prints msg/s and round trips per message.", stderr)
	var o drain.Options
	rounds := fs.Int("rounds", 3, "alternating rounds; the best of each system is kept")
	fs.IntVar(&o.Messages, "messages", 20000, "backlog each system drains")
	fs.IntVar(&o.Workers, "workers", 16, "handler concurrency of every system (the listener's default max workers)")
	fs.StringVar(&o.Dir, "data-dir", "", "directory for the stores (default: a temporary directory)")
	systems := fs.String("systems", "", "comma-separated systems to run (default all: wqhost, river, jetstream-sync, wqhost-nats-sync, jetstream, wqhost-nats, jetstream-doubleack)")
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
	rows, err := drain.Run(ctx, o, *rounds, func(s string) { fmt.Fprintln(stderr, "  "+s) })
	if err != nil {
		return err
	}
	printDrain(stdout, rows)
	return nil
}

func printDrain(w io.Writer, rows []drain.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tmsg/s\tround trips/msg\tSQLite commits/msg\tdurability\tsetup")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%.3f %s\t%s\t%s\t%s\n", r.System, r.MsgPerSec, r.CallsPerMsg, r.Calls, commitsCell(r), r.Durability, r.Setup)
	}
	tw.Flush()
	for _, l := range drain.Lines(rows) {
		fmt.Fprintln(w, l)
	}
}

func commitsCell(r drain.Result) string {
	if r.CommitsPerMsg == 0 {
		return "-"
	}
	return fmt.Sprintf("%.4f", r.CommitsPerMsg)
}
