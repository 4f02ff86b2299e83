package report

import (
	"fmt"
	"strings"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/drain"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// notMeasured fills a target row whose figure this run does not have: never a number.
const notMeasured = "not measured"

// A target is a headline row's goal: at least (or at most) Bound, shown as Text.
type target struct {
	Text   string
	Bound  float64
	AtMost bool
}

func (t target) holds(v float64) string {
	if t.Text == "" {
		return ""
	}
	if v == 0 {
		return notMeasured
	}
	if t.AtMost && v <= t.Bound || !t.AtMost && v >= t.Bound {
		return "yes"
	}
	return "**no**"
}

var (
	atLeast20    = target{"≥ 20×", 20, false}
	atLeast5     = target{"≥ 5×", 5, false}
	above1       = target{"> 1×", 1.0000001, false}
	drain80k     = target{"≥ 80,000 msg/s", 80000, false}
	tightLoop    = target{"≤ 1.3×", 1.3, true}
	goHeavy      = target{"≤ 1.05×", 1.05, true}
	realisticMax = target{"≤ 1.1×", 1.1, true}
	noTarget     = target{}
	issueNames   = struct{ drain, river, timeLimit string }{
		"local drain msg/s", "local drain vs River", "time limit cost",
	}
)

// targetRows are the Performance issue's targets, one row each, always present: a figure
// this run lacks reads "not measured".
func targetRows(row func(what, measured string, t target, v float64), r *Results) {
	w := drain.Find(r.Drain, "wqhost", false)
	if w != nil {
		ceiling := ""
		if r.DrainFsync != nil {
			ceiling = fmt.Sprintf("; %.2f of the disk's fsync ceiling, %.0f fsyncs/s", w.SyncRatio(*r.DrainFsync), r.DrainFsync.PerSec)
		}
		row(issueNames.drain+": wqhost listener, local store, no-op handler, synchronous=FULL", fmt.Sprintf("**%.0f** (%.3f queue calls, %.4f commits per message%s)", w.MsgPerSec, w.CallsPerMsg, w.CommitsPerMsg, ceiling), drain80k, w.MsgPerSec)
	} else {
		row(issueNames.drain, notMeasured, drain80k, 0)
	}
	for _, c := range []struct{ system, what string }{
		{"river-postgres", " on PostgreSQL (riverpgxv5, River's benchmark settings), same workload: wqhost ÷ River"},
		{"river-sqlite", " on SQLite (riversqlite, the local store's pragmas), same workload: wqhost ÷ River"},
	} {
		if rv := drain.Find(r.Drain, c.system, false); w != nil && rv != nil && rv.MsgPerSec > 0 {
			row(issueNames.river+c.what, fmt.Sprintf("**%s** (%.0f vs %.0f msg/s)", ratio(w.MsgPerSec/rv.MsgPerSec), w.MsgPerSec, rv.MsgPerSec), above1, w.MsgPerSec/rv.MsgPerSec)
		} else {
			row(issueNames.river+c.what, notMeasured, above1, 0)
		}
	}
	tight, realistic, heavy := r.TimeLimit.Figures()
	for _, c := range []struct {
		what string
		v    float64
		t    target
	}{
		{issueNames.timeLimit + ", micro loops (worst case): with fuel checks ÷ the same code unrolled without them", tight, tightLoop},
		{issueNames.timeLimit + ", realistic guests (worst of billing and per-char vowels in Go, TinyGo, Rust): with ÷ without", realistic, realisticMax},
		{issueNames.timeLimit + ", go heavy (CPU-heavy standard-Go guest): with ÷ without", heavy, goHeavy},
	} {
		m := notMeasured
		if c.v > 0 {
			m = fmt.Sprintf("**%.2f×**", c.v)
		}
		row(c.what, m, c.t, c.v)
	}
}

func headline(b *strings.Builder, r *Results) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	row := func(what, measured string, t target, v float64) {
		p("| %s | %s | %s | %s |\n", what, measured, t.Text, t.holds(v))
	}
	p("## Headline (this run)\n\n")
	p("Each row says what it compares, wqhost's figure first (per call: Extism's time ÷ wqhost's; end to end: wqhost's msg/s ÷ Extism's), and, with a target, whether this run met it (*not measured*: the run has no figure for it; see Notes at the end).\n\n")
	p("| comparison | measured (wqhost vs Extism) | target | holds |\n|---|--:|---|---|\n")
	comparisonRows(func(what, measured, goal, verdict string) {
		p("| %s | %s | %s | %s |\n", what, measured, goal, verdict)
	}, r.Headline, Busy(r.Machine))
	b.WriteString(machineNote(r))
	p("\n")
	b.WriteString(limitsNote)
	p("| other comparison | measured | target | holds |\n|---|--:|---|---|\n")
	targetRows(row, r)
	if x := suite.Ratio(r.PerCall, engine.Noop, engine.Extism, engine.WqhostNoTimeout); x > 0 {
		row("dispatch only, no-op call, neither with a time limit: Extism (`noop.wasm`) ÷ wqhost pooled (`noop-go`)", "**"+ratio(x)+"**", atLeast20, x)
	}
	if x := suite.Ratio(r.PerCall, engine.Noop, engine.ExtismTimeout, engine.Wqhost); x > 0 {
		row("dispatch only, no-op call, both with a per-call time limit: Extism ÷ wqhost pooled", "**"+ratio(x)+"**", atLeast20, x)
	}
	for _, c := range []struct {
		what     string
		l        engine.Logic
		num, den engine.Kind
	}{
		{"dispatch only, no-op call: Extism without a limit ÷ wqhost with its default limit", engine.Noop, engine.Extism, engine.Wqhost},
		{"dispatch only, no-op call: instantiate-per-message ÷ wqhost pooled", engine.Noop, engine.Instantiate, engine.Wqhost},
		{"dispatch only, no-op call: wqhost pooled ÷ plain Go (the sandbox's price)", engine.Noop, engine.Wqhost, engine.Go},
	} {
		if x := suite.Ratio(r.PerCall, c.l, c.num, c.den); x > 0 {
			row(c.what, ratio(x), noTarget, x)
		}
	}
	if js := drain.Find(r.Drain, "jetstream", true); js != nil {
		if w := drain.Find(r.Drain, "wqhost", false); w != nil {
			row("local drain vs a plain JetStream pull consumer, both fsyncing every write: wqhost ÷ JetStream", fmt.Sprintf("%s (%.0f vs %.0f msg/s)", ratio(w.MsgPerSec/js.MsgPerSec), w.MsgPerSec, js.MsgPerSec), noTarget, 0)
		}
	}
	for _, bk := range suite.Backends {
		lst, nv := consumerRow(r.Consumers, bk, consumer.Listener), consumerRow(r.Consumers, bk, consumer.Naive)
		if lst != nil && nv != nil && nv.MsgPerSec > 0 {
			row(fmt.Sprintf("%s: listener msg/s ÷ naive loop msg/s", bk), fmt.Sprintf("%s (%.0f vs %.0f msg/s)", ratio(lst.MsgPerSec/nv.MsgPerSec), lst.MsgPerSec, nv.MsgPerSec), noTarget, 0)
			row(fmt.Sprintf("%s: queue calls per message, listener vs naive loop", bk), fmt.Sprintf("%.3f vs %.3f", lst.CallsPerMsg, nv.CallsPerMsg), noTarget, 0)
		}
	}
	if !hasBackend(r, suite.Azurite) {
		row("Azurite rows", notMeasured, noTarget, 0)
	}
	b.WriteString(machineNote(r))
	p("\n")
	p("**The per-call time limit** is a fuel counter the runtime adds to a wqhost/v1 or Extism-ABI module at load (`runtime/internal/fuel`): checks at function entries and loop headers, and a call into the host when the fuel runs out, which ends the call once its time is up. Its price is the *time limit cost* rows above (the same code with and without the checks, from the runtime's benchmarks). The `wqhost` and `wqhost-notimeout` engines below both run the instrumented module (the pool's `Timeout` only sets the deadline), so their difference is not the time limit's cost. Extism's own limit (`extism-timeout`) is wazero's close-on-context-done, which starts a watchdog goroutine per call and leaves compiled code for Go at every loop back-edge.\n\n")
	if len(r.TimeLimit.Cases) > 0 {
		timeLimitCases(b, r.TimeLimit)
		b.WriteString(machineNote(r) + "\n")
	}
}

// caseNotes say what each case of the runtime's fuel benchmark runs.
var caseNotes = map[string]string{
	"count":        "a counting loop",
	"nested":       "a loop of 16 passes in a loop",
	"call":         "a loop calling a small function",
	"br_table":     "a loop through a `br_table`",
	"go-byte-loop": "standard Go, one table lookup a pass over 16 KiB, every pass through the function's jump table and its check",
	"go-heavy":     "count-vowels-go on 1 KiB, eight bytes a pass",
	// The realistic guests, against their modules unchanged (the loops above are against
	// their code unrolled without checks).
	"billing-go":            "billing-go on a transaction of eight items",
	"billing-tinygo":        "billing-tinygo on a transaction of eight items",
	"vowels-perchar-go":     "count-vowels-perchar-go on 1 KiB (Extism's algorithm, standard Go)",
	"vowels-perchar-tinygo": "count-vowels-perchar-tinygo on 1 KiB (Extism's algorithm, TinyGo)",
	"vowels-rust":           "count-vowels-rust on 1 KiB",
}

// timeLimitCases lists the time limit's cost case by case: the tight loops are the worst
// cases, and standard Go's byte loop the worst of them.
func timeLimitCases(b *strings.Builder, tl TimeLimitCost) {
	if len(tl.Cases) == 0 {
		return
	}
	fmt.Fprintf(b, "Case by case (`%s`, each the median of its runs; below 1×, small loops unrolled run faster than the original; the Go guests are measured over eight code placements, because where the hot loop lands moves them by as much as the checks cost):\n\n", tl.Command)
	fmt.Fprintf(b, "| case | with ÷ without |\n|---|--:|\n")
	for _, c := range tl.Cases {
		name := c.Name
		if n := caseNotes[c.Name]; n != "" {
			name += ": " + n
		}
		fmt.Fprintf(b, "| %s | %.2f× |\n", name, c.Ratio)
	}
	fmt.Fprintf(b, "\nThese ratios depend on the CPU: the checks' cost is a matter of how the core runs a load, a subtraction, a store and a branch beside the guest's own code, so the same cases differ between CPU generations (see the machine line).\n")
}
