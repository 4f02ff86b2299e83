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
	atLeast20  = target{"≥ 20×", 20, false}
	atLeast5   = target{"≥ 5×", 5, false}
	above1     = target{"> 1×", 1.0000001, false}
	drain80k   = target{"≥ 80,000 msg/s", 80000, false}
	tightLoop  = target{"≤ 1.3×", 1.3, true}
	goHeavy    = target{"≤ 1.05×", 1.05, true}
	noTarget   = target{}
	issueNames = struct{ stdGo, drain, river, timeLimit string }{
		"e2e vowels std-go vs extism", "local drain msg/s", "local drain vs River", "time limit cost",
	}
)

// targetRows are the Performance issue's targets, one row each, always present: a figure
// this run lacks reads "not measured".
func targetRows(row func(what, measured string, t target, v float64), r *Results) {
	// Standard Go against Extism end to end, each with its default (wqhost: the time limit on).
	if g, x := msgPerSec(r.Engines, engine.Vowels, engine.Wqhost), msgPerSec(r.Engines, engine.Vowels, engine.Extism); g > 0 && x > 0 {
		row(issueNames.stdGo+": wqhost standard-Go guest with its default time limit ÷ Extism without", fmt.Sprintf("**%s** (%.0f vs %.0f msg/s)", ratio(g/x), g, x), atLeast5, g/x)
	} else {
		row(issueNames.stdGo, notMeasured, atLeast5, 0)
	}
	w, rv := drain.Find(r.Drain, "wqhost", false), drain.Find(r.Drain, "river", false)
	if w != nil {
		row(issueNames.drain+": wqhost listener, local store, no-op handler, synchronous=FULL", fmt.Sprintf("**%.0f** (%.3f queue calls, %.4f commits per message)", w.MsgPerSec, w.CallsPerMsg, w.CommitsPerMsg), drain80k, w.MsgPerSec)
	} else {
		row(issueNames.drain, notMeasured, drain80k, 0)
	}
	if w != nil && rv != nil {
		row(issueNames.river+" on SQLite, same workload and pragmas: wqhost ÷ River", fmt.Sprintf("**%s** (%.0f vs %.0f msg/s; commits per message %.4f vs %.4f)", ratio(w.MsgPerSec/rv.MsgPerSec), w.MsgPerSec, rv.MsgPerSec, w.CommitsPerMsg, rv.CommitsPerMsg), above1, w.MsgPerSec/rv.MsgPerSec)
	} else {
		row(issueNames.river, notMeasured, above1, 0)
	}
	tight, heavy := r.TimeLimit.Figures()
	for _, c := range []struct {
		what string
		v    float64
		t    target
	}{
		{issueNames.timeLimit + ", tight loop (worst case): with fuel checks ÷ without", tight, tightLoop},
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
	p("Each row with a target says whether this run met it (*not measured*: the run has no figure for it; see Notes at the end).\n\n")
	p("| comparison | measured | target | holds |\n|---|--:|---|---|\n")
	targetRows(row, r)
	if x := suite.Ratio(r.PerCall, engine.Noop, engine.Extism, engine.WqhostNoTimeout); x > 0 {
		row("no-op call, neither with a time limit (like for like): Extism ÷ wqhost pooled", "**"+ratio(x)+"**", atLeast20, x)
	}
	if x := suite.Ratio(r.PerCall, engine.Noop, engine.ExtismTimeout, engine.Wqhost); x > 0 {
		row("no-op call, both with a per-call time limit: Extism ÷ wqhost pooled", "**"+ratio(x)+"**", atLeast20, x)
	}
	for _, c := range []struct {
		what     string
		l        engine.Logic
		num, den engine.Kind
	}{
		{"no-op call: Extism without a limit ÷ wqhost with its default limit", engine.Noop, engine.Extism, engine.Wqhost},
		{"no-op call: instantiate-per-message ÷ wqhost pooled", engine.Noop, engine.Instantiate, engine.Wqhost},
		{"no-op call: wqhost pooled ÷ plain Go (the sandbox's price)", engine.Noop, engine.Wqhost, engine.Go},
		{"count-vowels call, both Rust, no time limits: Extism ÷ wqhost", engine.Vowels, engine.Extism, engine.WqhostRust},
		{"count-vowels call, Extism (Rust, no limit) ÷ wqhost (Go guest, default limit)", engine.Vowels, engine.Extism, engine.Wqhost},
		{"no-op call: Extism without a limit ÷ wqhost TinyGo guest with its default limit", engine.Noop, engine.Extism, engine.WqhostTinyGo},
	} {
		if x := suite.Ratio(r.PerCall, c.l, c.num, c.den); x > 0 {
			row(c.what, ratio(x), noTarget, x)
		}
	}
	for _, l := range engine.Logics {
		e := msgPerSec(r.Engines, l, engine.Extism)
		if e == 0 {
			continue
		}
		if tg := msgPerSec(r.Engines, l, engine.WqhostTinyGo); tg > 0 {
			row(fmt.Sprintf("end to end, %s: wqhost TinyGo guest with its default time limit ÷ Extism without", l), fmt.Sprintf("**%s** (%.0f vs %.0f msg/s)", ratio(tg/e), tg, e), atLeast5, tg/e)
		}
		// Like for like: no time limit on either side, and for vowels the same language as
		// Extism's plugin (Rust) where that module exists.
		like, likeName := msgPerSec(r.Engines, l, engine.WqhostRust), "both Rust, no time limits"
		if like == 0 {
			like, likeName = msgPerSec(r.Engines, l, engine.WqhostNoTimeout), "no time limits"
		}
		if like > 0 {
			row(fmt.Sprintf("end to end, %s, like for like (%s): wqhost msg/s ÷ Extism msg/s", l, likeName), fmt.Sprintf("**%s** (%.0f vs %.0f msg/s)", ratio(like/e), like, e), above1, like/e)
		}
		if w := msgPerSec(r.Engines, l, engine.Wqhost); w > 0 && l != engine.Vowels { // vowels: the target row above
			row(fmt.Sprintf("end to end, %s: wqhost standard-Go guest with its default time limit ÷ Extism without", l), fmt.Sprintf("%s (%.0f vs %.0f msg/s)", ratio(w/e), w, e), noTarget, w/e)
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
	p("\n")
	p("**The per-call time limit** is a fuel counter the runtime adds to a wqhost/v1 or Extism-ABI module at load (`runtime/instrument.go`): checks at function entries and loop headers, and a call into the host when the fuel runs out, which ends the call once its time is up. Its price is the *time limit cost* rows above (the same code with and without the checks, from the runtime's benchmarks). The `wqhost` and `wqhost-notimeout` engines below both run the instrumented module (the pool's `Timeout` only sets the deadline), so their difference is not the time limit's cost. Extism's own limit (`extism-timeout`) is wazero's close-on-context-done, which starts a watchdog goroutine per call and leaves compiled code for Go at every loop back-edge.\n\n")
	timeLimitCases(b, r.TimeLimit)
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
	fmt.Fprintf(b, "\n")
}
