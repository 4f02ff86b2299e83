package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/wqhost/wqhost/bench/internal/report"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// cmdHeadline measures the headline's like-for-like contests alone (a minute or two, where
// `all` takes many) and prints the machine line and the summary lines `all` prints:
// `extism same wasm per call: X`, `extism same wasm e2e: Y`,
// `same algorithm e2e: std-go=A tinygo=B rust=C` and the rest.
func cmdHeadline(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("headline", "Measures the headline's like-for-like contests (Extism's own plugins in wqhost and in\nthe go-sdk; the same algorithm per language; the optimised handler; dispatch only) in\nalternating rounds, the same messages on both sides, and prints their summary lines.", stderr)
	var c common
	c.register(fs)
	var o suite.HeadlineOptions
	fs.IntVar(&o.Messages, "messages", 20000, "messages per drain, the same for every engine")
	fs.IntVar(&o.Rounds, "rounds", 5, "alternating drains per engine (the best is kept)")
	fs.IntVar(&o.CallRounds, "call-rounds", 10, "alternating rounds of calls per engine (the fastest is kept)")
	fs.DurationVar(&o.RoundTime, "round-time", 200*time.Millisecond, "length of a round of calls, the same for every engine")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	paths, stores, done, err := c.open()
	if err != nil {
		return err
	}
	defer done()
	o.Paths, o.Stores = paths, stores
	m := report.Describe()
	fmt.Fprintln(stdout, report.MachineLine(m, "", 0))
	figs, err := measureHeadline(ctx, o, stderr)
	for _, l := range report.HeadlineLines(figs, m) {
		fmt.Fprintln(stdout, l)
	}
	fmt.Fprintln(stdout, report.MachineLine(m, report.LoadAverage(), report.Calibrate()))
	return err
}

// measureHeadline runs suite.MeasureHeadline, logging its steps to log.
func measureHeadline(ctx context.Context, o suite.HeadlineOptions, log io.Writer) ([]suite.Figure, error) {
	start := time.Now()
	o.Progress = func(s string) { fmt.Fprintf(log, "   %s (%s)\n", s, time.Since(start).Round(time.Second)) }
	return suite.MeasureHeadline(ctx, o)
}
