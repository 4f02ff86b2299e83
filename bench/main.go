// Command wqbench measures wqhost against what a user would otherwise pick: Extism's Go SDK,
// a wazero host that instantiates a module per message, plain Go (the floor), and, on the
// queue side, a naive receive-one loop and a fixed 1-second poller. `wqbench all` regenerates
// docs/benchmarks.md and its charts; see that file for the figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

const usage = `wqbench: wqhost benchmarks against Extism, instantiate-per-message, plain Go,
a naive receive-1 loop and a fixed 1-second poller.

Usage:
  wqbench run     [flags]   one workload through a queue: msg/s, handler p50/p99, queue
                            calls per message, CPU, RSS (progress bar on stderr)
  wqbench percall [flags]   per-call cost of every engine, same handler logic, one run
  wqbench idle    [flags]   queue calls while idle: listener vs naive loop vs 1 s poller
  wqbench headline [flags]  the headline's like-for-like rows alone: Extism's own plugins in
                            wqhost and in the go-sdk, the same algorithm per language,
                            dispatch only (same messages and memory cap on both sides)
  wqbench tinygo            the TinyGo handlers against Extism (per call, end to end) and
                            the pooled no-op against a raw wazero call (BenchmarkTinyGo)
  wqbench drain   [flags]   local drain: wqhost's local store vs River (PostgreSQL, SQLite) vs
                            a plain JetStream pull consumer (no-op handler, durable, at least
                            once), beside the disk's fsync rate
  wqbench all     [flags]   everything above plus the scaling and size sweeps; writes
                            <out>/benchmarks.md, <out>/img/*.png, <out>/img/results.json
  wqbench charts  [flags]   re-render the charts and the report from results.json

Run from the bench/ directory of a wqhost checkout, e.g.
  cd bench && go run . all --out ../docs
  cd bench && go run . run --backend local --handler vowels --messages 20000 --size 1024
Go benchmarks of the per-call ratios: cd bench && go test -run '^$' -bench .

"wqbench <command> --help" lists a command's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmds := map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"run": cmdRun, "percall": cmdPerCall, "idle": cmdIdle, "all": cmdAll, "charts": cmdCharts,
		"tinygo": cmdTinyGo, "drain": cmdDrain, "headline": cmdHeadline,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "wqbench: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err := cmd(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "wqbench %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func defaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	d = filepath.Join(d, "wqhost-bench", "wazero")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("compilation cache %s: %w", d, err)
	}
	return d, nil
}

// newFlags returns a flag set that prints its usage to w, headed by what.
func newFlags(name, what string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: wqbench %s [flags]\n\n%s\n\nFlags:\n", name, what)
		fs.PrintDefaults()
	}
	return fs
}

// splitList parses a comma-separated flag value.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
