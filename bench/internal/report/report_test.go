package report

import (
	"slices"

	"github.com/wqhost/wqhost/bench/internal/drain"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

func sample() *Results {
	return &Results{
		Command: "cd bench && go run . all --out ../docs",
		Machine: Machine{CPU: "Test CPU", Cores: 2, Go: "go1.26"},
		PerCall: []suite.PerCallRow{
			{Logic: engine.Noop, Engine: engine.Go, NsPerCall: 2},
			{Logic: engine.Noop, Engine: engine.Wqhost, NsPerCall: 1000},
			{Logic: engine.Noop, Engine: engine.Extism, NsPerCall: 45000},
			{Logic: engine.Noop, Engine: engine.Instantiate, NsPerCall: 9e6},
		},
		Engines: []suite.RunResult{
			{RunOptions: suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener, Engine: engine.Wqhost, Logic: engine.Noop}, MsgPerSec: 90000},
			{RunOptions: suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener, Engine: engine.Extism, Logic: engine.Noop}, MsgPerSec: 9000},
		},
		Consumers: []suite.RunResult{
			{RunOptions: suite.RunOptions{Backend: suite.Local, Consumer: consumer.Listener}, MsgPerSec: 9000, CallsPerMsg: 0.07},
			{RunOptions: suite.RunOptions{Backend: suite.Local, Consumer: consumer.Naive}, MsgPerSec: 600, CallsPerMsg: 2},
		},
		Idle:    []suite.IdleRow{{Backend: suite.Local, Consumer: "fixed 1 s poller", Seconds: 60, PerHour: 3600}},
		Started: time.Date(2026, 11, 22, 18, 0, 0, 0, time.UTC),
	}
}

func TestMarkdownShowsRatiosAndCommand(t *testing.T) {
	md := Markdown(sample(), []string{ChartPerCall})
	for _, want := range []string{
		"cd bench && go run . all --out ../docs",
		"| no-op call: Extism without a limit ÷ wqhost with its default limit | 45.0× |  |  |",
		"instantiate-per-message ÷ wqhost pooled | 9000×",
		"end to end, noop: wqhost standard-Go guest with its default time limit ÷ Extism without | 10.0× (90000 vs 9000 msg/s)",
		"local: listener msg/s ÷ naive loop msg/s | 15.0×",
		"![per-call cost by engine](img/bench-percall.png)",
		"Test CPU, 2 cores",
		"Azurite rows | not measured",
		"go test -run '^$' -bench .",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("benchmarks.md lacks %q", want)
		}
	}
	if strings.Contains(md, "img/bench-engines.png") {
		t.Error("links a chart that was not rendered")
	}
}

func TestChartsRenderWhatHasData(t *testing.T) {
	dir := t.TempDir()
	got, err := Charts(sample(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ChartPerCall, ChartEngines, ChartConsumers, ChartCalls, ChartIdle}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("rendered %v, want %v", got, want)
	}
}

// row finds the headline row that starts with what.
func row(t *testing.T, md, what string) string {
	t.Helper()
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| "+what) {
			return l
		}
	}
	t.Fatalf("no row %q in:\n%s", what, md)
	return ""
}

func TestTargetRowsSayNotMeasuredWithoutAFigure(t *testing.T) {
	md := Markdown(sample(), nil)
	for _, what := range []string{"e2e vowels std-go vs extism", "local drain msg/s", "local drain vs River", "time limit cost, tight loop", "time limit cost, go heavy"} {
		r := row(t, md, what)
		if strings.Count(r, "not measured") != 2 {
			t.Errorf("row %q: want the figure and the verdict both 'not measured'", r)
		}
	}
}

func TestTargetRowsSayWhetherTheyHold(t *testing.T) {
	r := sample()
	r.Engines = append(r.Engines,
		suite.RunResult{RunOptions: suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener, Engine: engine.Wqhost, Logic: engine.Vowels}, MsgPerSec: 6000},
		suite.RunResult{RunOptions: suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener, Engine: engine.Extism, Logic: engine.Vowels}, MsgPerSec: 1000})
	r.Drain = []drain.Result{
		{System: "wqhost", MsgPerSec: 70000, Messages: 100, Durability: "FULL"},
		{System: "river-postgres", MsgPerSec: 7000, Messages: 100, Durability: "PostgreSQL"},
		{System: "river-sqlite", MsgPerSec: 3500, Messages: 100, Durability: "FULL", SyncsPerMsg: 0.01},
	}
	r.DrainFsync = &drain.Fsync{PerSec: 700, WriteBytes: 4096}
	r.DrainLoad = []string{"1.50 1.20 1.00", "2.50 1.40 1.10"}
	r.TimeLimit = TimeLimitCost{TightLoop: 1.25, GoHeavy: 1.10}
	md := Markdown(r, nil)
	for what, want := range map[string]string{
		"e2e vowels std-go vs extism":        "| **6.00×** (6000 vs 1000 msg/s) | ≥ 5× | yes |",
		"local drain msg/s":                  "| ≥ 80,000 msg/s | **no** |",
		"local drain vs River on PostgreSQL": "| **10.0×** (70000 vs 7000 msg/s",
		"local drain vs River on SQLite":     "| **20.0×** (70000 vs 3500 msg/s",
		"time limit cost, tight loop":        "| **1.25×** | ≤ 1.3× | yes |",
		"time limit cost, go heavy":          "| **1.10×** | ≤ 1.05× | **no** |",
	} {
		if got := row(t, md, what); !strings.Contains(got, want) {
			t.Errorf("row %q lacks %q", got, want)
		}
	}
	if !strings.Contains(md, "local drain msg/s: wqhost=70000 river-postgres=7000 river-sqlite=3500 fsync/s=700 ceiling-ratio=0.00") {
		t.Error("the drain section lacks the issue's summary line")
	}
	if !strings.Contains(md, "load average 1.50 1.20 1.00 (1, 5, 15 min) at their start and 2.50 1.40 1.10 at their end") {
		t.Error("the drain section does not say the load it ran at")
	}
	// River on SQLite: 3500 msg/s × 0.01 syncs/msg = 35 syncs/s, 0.05 of the disk's 700.
	if got := row(t, md, "river-sqlite |"); !strings.HasSuffix(got, "| 0.0100 | 0.05 |") {
		t.Errorf("drain row %q: want its disk syncs/msg and syncs/s ÷ fsync/s", got)
	}
}

// TestNoParagraphAboutAGoneMechanism: the time limit is the fuel counter; close-on-context-done
// (and its watchdog goroutine) is named only as Extism's limit.
func TestNoParagraphAboutAGoneMechanism(t *testing.T) {
	md := Markdown(sample(), nil)
	if strings.Contains(md, "is not free") {
		t.Error("the report still says the time limit is not free (the close-on-context-done paragraph)")
	}
	for _, l := range strings.Split(md, "\n") {
		if strings.Contains(l, "watchdog") && !strings.Contains(l, "Extism's own limit") {
			t.Errorf("'watchdog' outside the sentence about Extism's limit: %q", l)
		}
	}
}

func TestSweepsShowTheIdeal(t *testing.T) {
	r := sample()
	r.Scaling = []suite.RunResult{
		{RunOptions: suite.RunOptions{Backend: suite.Local, Consumer: consumer.Listener, Workers: 1}, MsgPerSec: 1000},
		{RunOptions: suite.RunOptions{Backend: suite.Local, Consumer: consumer.Listener, Workers: 4}, MsgPerSec: 3000},
	}
	r.Sizes = []suite.RunResult{
		{RunOptions: suite.RunOptions{Backend: suite.Local, Logic: engine.Noop, Size: 100}, MsgPerSec: 10000},
		{RunOptions: suite.RunOptions{Backend: suite.Local, Logic: engine.Noop, Size: 1000}, MsgPerSec: 5000},
	}
	r.Density = []DensityRow{{Bindings: 100, RSSMiB: 50, RSSIdleMiB: 40}, {Bindings: 1000, RSSMiB: 250, RSSIdleMiB: 200}}
	md := Markdown(r, nil)
	for _, want := range []string{
		"| local | 4 | 3000 | 4000 | 0.75 |",                    // linear in workers from w=1
		"| noop | 1000 B | 5000 | 200.00 µs | 1.00 ms | 0.20 |", // linear in size from 100 B
		"| 1000 | 0.0 s | 250 MiB | 500 MiB | 0.50 |",           // linear in bindings from 100
	} {
		if !strings.Contains(md, want) {
			t.Errorf("benchmarks.md lacks the sweep row %q", want)
		}
	}
	got, err := Charts(r, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{ChartScaling, ChartSizes, ChartDensity} {
		if !slices.Contains(got, c) {
			t.Errorf("chart %s not rendered (got %v)", c, got)
		}
	}
}

func TestRegenerationKeepsHandWrittenSections(t *testing.T) {
	old := "# Benchmarks\n\nstale generated text\n\n" + HandWrittenMarker + "\n\n## Density (by hand)\n\nkept\n"
	got := WithHandWritten("# Benchmarks\n\nnew generated text\n", old)
	if !strings.Contains(got, "new generated text") || strings.Contains(got, "stale generated text") {
		t.Errorf("generated part not replaced:\n%s", got)
	}
	if !strings.HasSuffix(got, HandWrittenMarker+"\n\n## Density (by hand)\n\nkept\n") {
		t.Errorf("hand-written part not kept after the marker:\n%s", got)
	}
	if again := WithHandWritten("# Benchmarks\n\nnew generated text\n", got); again != got {
		t.Errorf("regenerating twice changed the file:\n%s", again)
	}
}

// TestTimeLimitFigures: the headline's figures come from every run's medians, the worst
// tight case and go-heavy, not from the last run's summary line; without cases, the line's.
func TestTimeLimitFigures(t *testing.T) {
	for _, tt := range []struct {
		name         string
		tl           TimeLimitCost
		tight, heavy float64
	}{
		{"summary line only", TimeLimitCost{TightLoop: 1.2, GoHeavy: 1.04}, 1.2, 1.04},
		{"cases win over the last summary line", TimeLimitCost{TightLoop: 1.03, GoHeavy: 1.02, Cases: []TimeLimitCase{
			{"count", 1.01}, {"nested", 0.58}, {"go-byte-loop", 1.08}, {"go-heavy", 1.00},
		}}, 1.08, 1.00},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tight, heavy := tt.tl.Figures(); tight != tt.tight || heavy != tt.heavy {
				t.Errorf("Figures() = %.2f, %.2f; want %.2f, %.2f", tight, heavy, tt.tight, tt.heavy)
			}
		})
	}
}
