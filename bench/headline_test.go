package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/report"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// BenchmarkHeadline measures the headline's like-for-like contests (suite.MeasureHeadline:
// Extism's own count_vowels.wasm and noop.wasm, and the project's TinyGo Extism plugin, each in
// wqhost under abi extism and in Extism's go-sdk; the per-char guests in standard Go, TinyGo and
// Rust against count_vowels.wasm; the optimised table guest), with the same calls and messages
// on both sides in alternating rounds, and prints the machine line and the summary lines
// `go run . all` and `go run . headline` print. The ratios are metrics too. -short runs small
// rounds, enough to show it still works, not for a figure. Run:
//
//	cd bench && go test -run '^$' -bench Headline -benchtime 1x
func BenchmarkHeadline(b *testing.B) {
	ctx := context.Background()
	p := benchPaths(b)
	var figs []suite.Figure
	b.Run("contests", func(b *testing.B) {
		for b.Loop() {
			// The contests below are the figure; b.N is irrelevant.
		}
		m := report.Describe()
		fmt.Println(report.MachineLine(m, "", 0))
		var err error
		figs, err = suite.MeasureHeadline(ctx, suite.HeadlineOptions{
			Paths: p, Stores: &suite.Stores{Dir: b.TempDir(), Repo: p.Repo},
			Messages: shortOr(20000, 200), Rounds: shortOr(5, 1), CallRounds: shortOr(10, 1), RoundTime: time.Duration(shortOr(200, 5)) * time.Millisecond,
		})
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range report.HeadlineLines(figs, m) {
			fmt.Println(l)
		}
		if testing.Short() {
			fmt.Println("(-short: too few calls and messages for a figure)")
		}
		fmt.Println(report.MachineLine(m, report.LoadAverage(), report.Calibrate()))
	})
	b.Run("ratios", func(b *testing.B) {
		for b.Loop() {
		}
		x := suite.FindFigure(figs, engine.Vowels, engine.Extism)
		if x == nil {
			b.Skip("no contest figures")
		}
		for _, k := range []engine.Kind{engine.WqhostExtism, engine.WqhostPerChar, engine.WqhostPerCharTinyGo, engine.WqhostRust, engine.Wqhost} {
			if w := suite.FindFigure(figs, engine.Vowels, k); w != nil && w.NsPerCall > 0 && x.MsgPerSec > 0 {
				b.ReportMetric(x.NsPerCall/w.NsPerCall, "x-call-"+string(k))
				b.ReportMetric(w.MsgPerSec/x.MsgPerSec, "x-e2e-"+string(k))
			}
		}
	})
}

// TestHeadlineCommandPrintsTheLines: `go run . headline` (small sizes) prints the machine line
// and the summary lines the check reads, each with a figure.
func TestHeadlineCommandPrintsTheLines(t *testing.T) {
	if testing.Short() {
		t.Skip("opens every headline engine")
	}
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"headline", "--messages", "64", "--rounds", "1", "--call-rounds", "1", "--round-time", "5ms",
		"--data-dir", t.TempDir()}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, re := range []string{
		`(?m)^machine: cpu=".*" .*mhz=\d+ cores=\d+ calibration=[0-9.]+ns/pass`,
		`(?m)^extism same wasm per call: [0-9.]+×`,
		`(?m)^extism same wasm e2e: [0-9.]+× \(\d+ vs \d+ msg/s, 64 messages each`,
		`(?m)^same algorithm e2e: std-go=[0-9.]+× tinygo=[0-9.]+× rust=[0-9.]+×`,
		`(?m)^dispatch only \(noop.wasm\) per call: [0-9.]+×`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", re, out)
		}
	}
}
