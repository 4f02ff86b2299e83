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
		Command:          "cd bench && go run . all --out ../docs",
		Machine:          Machine{CPU: "Test CPU", Family: "25", Model: "17", Stepping: "1", MHz: 2596.1, Cores: 2, Go: "go1.26", LoadStart: "1.04 1.07 1.32", CalibrationNs: 0.39},
		LoadAfter:        "3.63 2.46 1.83",
		CalibrationAfter: 0.41,
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
		"| dispatch only, no-op call: Extism without a limit ÷ wqhost with its default limit | 45.0× |  |  |",
		"instantiate-per-message ÷ wqhost pooled | 9000×",
		"local: listener msg/s ÷ naive loop msg/s | 15.0×",
		"![per-call cost by engine](img/bench-percall.png)",
		"Test CPU (family 25, model 17, stepping 1), 2 cores",
		"| clock | 2596 MHz",
		"| calibration | 0.390 ns per pass of a counting loop at the start, 0.410 at the end",
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
	for _, what := range []string{"same .wasm, per call", "same .wasm, end to end", "same algorithm, same language, end to end", "local drain msg/s", "local drain vs River", "time limit cost, micro loops", "time limit cost, realistic guests", "time limit cost, go heavy"} {
		r := row(t, md, what)
		if strings.Count(r, "not measured") != 2 {
			t.Errorf("row %q: want the figure and the verdict both 'not measured'", r)
		}
	}
}

func TestTargetRowsSayWhetherTheyHold(t *testing.T) {
	r := sample()
	r.Drain = []drain.Result{
		{System: "wqhost", MsgPerSec: 70000, Messages: 100, Durability: "FULL"},
		{System: "river-postgres", MsgPerSec: 7000, Messages: 100, Durability: "PostgreSQL"},
		{System: "river-sqlite", MsgPerSec: 3500, Messages: 100, Durability: "FULL", SyncsPerMsg: 0.01},
	}
	r.DrainFsync = &drain.Fsync{PerSec: 700, WriteBytes: 4096}
	r.DrainLoad = []string{"1.50 1.20 1.00", "2.50 1.40 1.10"}
	r.TimeLimit = TimeLimitCost{TightLoop: 1.25, Realistic: 1.17, GoHeavy: 1.10}
	md := Markdown(r, nil)
	for what, want := range map[string]string{
		"local drain msg/s":                  "| ≥ 80,000 msg/s | **no** |",
		"local drain vs River on PostgreSQL": "| **10.0×** (70000 vs 7000 msg/s",
		"local drain vs River on SQLite":     "| **20.0×** (70000 vs 3500 msg/s",
		"time limit cost, micro loops":       "| **1.25×** | ≤ 1.3× | yes |",
		"time limit cost, realistic guests":  "| **1.17×** | ≤ 1.1× | **no** |",
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
// micro loop, the worst realistic guest and go-heavy, not from the last run's summary line;
// without cases, the line's.
func TestTimeLimitFigures(t *testing.T) {
	for _, tt := range []struct {
		name                    string
		tl                      TimeLimitCost
		micro, realistic, heavy float64
	}{
		{"summary line only", TimeLimitCost{TightLoop: 1.2, Realistic: 1.09, GoHeavy: 1.04}, 1.2, 1.09, 1.04},
		{"cases win over the last summary line", TimeLimitCost{TightLoop: 1.03, GoHeavy: 1.02, Cases: []TimeLimitCase{
			{"count", 1.01}, {"nested", 0.58}, {"go-byte-loop", 1.08}, {"billing-tinygo", 1.17}, {"vowels-rust", 1.07}, {"go-heavy", 1.00},
		}}, 1.08, 1.17, 1.00},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if micro, realistic, heavy := tt.tl.Figures(); micro != tt.micro || realistic != tt.realistic || heavy != tt.heavy {
				t.Errorf("Figures() = %.2f, %.2f, %.2f; want %.2f, %.2f, %.2f", micro, realistic, heavy, tt.micro, tt.realistic, tt.heavy)
			}
		})
	}
}

// headlineSample is a run's contests: Extism's count_vowels.wasm against wqhost's engines,
// the TinyGo Extism plugin in both hosts, noop.wasm in both.
func headlineSample() []suite.Figure {
	f := func(l engine.Logic, k engine.Kind, ns, msgs float64) suite.Figure {
		return suite.Figure{Logic: l, Engine: k, NsPerCall: ns, MsgPerSec: msgs, Messages: 20000, Rounds: 5, CallRounds: 10, RoundTime: 200 * time.Millisecond, CallsPerRound: int(2e8 / ns)}
	}
	return []suite.Figure{
		f(engine.Vowels, engine.Extism, 120000, 10000),
		f(engine.Vowels, engine.WqhostExtism, 20000, 45000),
		f(engine.Vowels, engine.WqhostPerChar, 50000, 25000),
		f(engine.Vowels, engine.WqhostPerCharTinyGo, 15000, 70000),
		f(engine.Vowels, engine.WqhostRust, 9000, 110000),
		f(engine.Vowels, engine.Wqhost, 1800, 260000),
		f(engine.Vowels, engine.ExtismTinyGo, 90000, 11000),
		f(engine.Vowels, engine.WqhostExtismTinyGo, 9000, 88000),
		f(engine.Noop, engine.Extism, 10000, 70000),
		f(engine.Noop, engine.WqhostExtism, 200, 700000),
	}
}

// TestHeadlineComparesLikeWithLike: the headline's first rows are the same .wasm file in
// both hosts, then the same algorithm per language; the table guest is an "optimised
// handler" row without a target, the no-op rows say "dispatch only", and each row shows the
// messages both sides drained.
func TestHeadlineComparesLikeWithLike(t *testing.T) {
	r := sample()
	r.Headline = headlineSample()
	md := Markdown(r, nil)
	_, head, _ := strings.Cut(md, "## Headline (this run)")
	var rows []string
	for _, l := range strings.Split(head, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| comparison") && !strings.HasPrefix(l, "| other comparison") {
			rows = append(rows, l)
		}
	}
	if len(rows) < 2 || !strings.HasPrefix(rows[0], "| same .wasm, per call: Extism's own `count_vowels.wasm`") || !strings.HasPrefix(rows[1], "| same .wasm, end to end: Extism's own `count_vowels.wasm`") {
		t.Fatalf("the first rows are not Extism's count_vowels.wasm in both hosts: %q", rows[:min(2, len(rows))])
	}
	for what, want := range map[string]string{
		"same .wasm, per call: Extism's own":            "| **6.00×** (20000 vs 120000 ns; fastest of 10 alternating rounds of 200ms each, 10000 vs 1666 calls a round) | ≥ 8× | **no** |",
		"same .wasm, end to end: Extism's own":          "| **4.50×** (45000 vs 10000 msg/s; 20000 messages each, best of 5 alternating drains) | ≥ 5× | **no** |",
		"same .wasm, per call: the project's TinyGo":    "| **10.0×** (9000 vs 90000 ns;",
		"same algorithm, same language, end to end":     "| **11.0×** (110000 vs 10000 msg/s; 20000 messages each",
		"same algorithm (each char tested":              "| **2.50×** (25000 vs 10000 msg/s;",
		"optimised handler (not the same algorithm":     "| **26.0×** (260000 vs 10000 msg/s; 20000 messages each, best of 5 alternating drains) |  |  |",
		"dispatch only, per call: Extism's `noop.wasm`": "| **50.0×** (200 vs 10000 ns;",
	} {
		if got := row(t, md, what); !strings.Contains(got, want) {
			t.Errorf("row %q lacks %q", got, want)
		}
	}
	if got := row(t, md, "same algorithm, same language, end to end"); !strings.HasSuffix(got, "| ≥ 10× | yes |") {
		t.Errorf("Rust vs Rust row %q: want target ≥ 10× met", got)
	}
	if !strings.Contains(md, "linear memory capped at 128 MiB on both") || !strings.Contains(md, "Extism without a timeout") {
		t.Error("the headline does not state both sides' limits")
	}
	if strings.Contains(md, "e2e vowels std-go vs extism") {
		t.Error("the table guest still heads a row with a target")
	}
}

func TestHeadlineLines(t *testing.T) {
	lines := strings.Join(HeadlineLines(headlineSample(), Machine{LoadStart: "0.50 0.40 0.30", Cores: 2}), "\n")
	for _, want := range []string{
		"extism same wasm per call: 6.00× (20000 vs 120000 ns per call; target ≥ 8×: no)",
		"extism same wasm e2e: 4.50× (45000 vs 10000 msg/s, 20000 messages each; target ≥ 5×: no)",
		"same algorithm e2e: std-go=2.50× tinygo=7.00× rust=11.0× (",
		"extism same wasm tinygo e2e: 8.00×",
		"dispatch only (noop.wasm) e2e: 10.0×",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("summary lines lack %q:\n%s", want, lines)
		}
	}
	if got := strings.Join(HeadlineLines(nil, Machine{}), "\n"); !strings.Contains(got, "extism same wasm per call: not measured") || !strings.Contains(got, "same algorithm e2e: std-go=not measured") {
		t.Errorf("without figures the lines must say not measured:\n%s", got)
	}
}

// TestMachineLineBesideEveryTable: every table of the report is followed by the machine line
// (CPU, clock, calibration, load at start and end) before the next section.
func TestMachineLineBesideEveryTable(t *testing.T) {
	r := sample()
	r.Headline = headlineSample()
	r.TimeLimit = TimeLimitCost{Cases: []TimeLimitCase{{"call", 1.9}}, Command: "go test"}
	md := Markdown(r, nil)
	line := MachineLine(r.Machine, r.LoadAfter, r.CalibrationAfter)
	for _, want := range []string{`cpu="Test CPU"`, "family=25 model=17 stepping=1", "mhz=2596", "calibration=0.390ns/pass (end 0.410)", `load="1.04 1.07 1.32"`, `load-end="3.63 2.46 1.83"`} {
		if !strings.Contains(line, want) {
			t.Errorf("machine line %q lacks %q", line, want)
		}
	}
	for _, sec := range strings.Split(md, "\n## ")[1:] {
		title, _, _ := strings.Cut(sec, "\n")
		if strings.Contains(sec, "|---") && !strings.Contains(sec, line) && title != "Machine" && title != "What is compared, exactly" {
			t.Errorf("section %q has a table but no machine line", title)
		}
	}
	if !strings.Contains(md, "These ratios depend on the CPU") {
		t.Error("the time limit's cases do not say they depend on the CPU")
	}
}

func TestCalibrate(t *testing.T) {
	ns := Calibrate()
	// One pass is a few instructions: far under 100 ns and above 0.01 ns on any machine.
	if ns <= 0.01 || ns >= 100 {
		t.Errorf("Calibrate() = %v ns per pass, want a figure for a few instructions", ns)
	}
}

// TestBusyMachineGivesNoVerdict: with the load above the core count at the start, the
// like-for-like targets' verdicts say the machine was busy (Extism slows more than wqhost
// under load, so the ratios grow): the targets are for a quiet machine.
func TestBusyMachineGivesNoVerdict(t *testing.T) {
	r := sample()
	r.Headline = headlineSample()
	r.Machine.LoadStart = "21.01 18.02 14.46"
	md := Markdown(r, nil)
	if got := row(t, md, "same algorithm, same language, end to end"); !strings.HasSuffix(got, "| ≥ 10× | yes (busy machine: load 21.01 on 2 cores, not a verdict) |") {
		t.Errorf("row %q: want the verdict marked busy", got)
	}
	if got := row(t, md, "same algorithm, same language, per call"); strings.Contains(got, "busy") {
		t.Errorf("row %q has no target and needs no mark", got)
	}
	lines := strings.Join(HeadlineLines(r.Headline, r.Machine), "\n")
	if !strings.Contains(lines, "target ≥ 8×: no (busy machine: load 21.01 on 2 cores, not a verdict)") {
		t.Errorf("summary lines do not mark the busy machine:\n%s", lines)
	}
	r.Machine.LoadStart = "1.50 1.00 1.00"
	if md := Markdown(r, nil); strings.Contains(md, "busy machine") {
		t.Error("a quiet machine (load under the cores) is marked busy")
	}
}
