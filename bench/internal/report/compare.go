package report

import (
	"fmt"
	"strings"

	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// The like-for-like rows of the headline (issue #43): each compares wqhost with Extism's Go
// SDK on the same work, from the contests of suite.MeasureHeadline, where both sides had the
// same body, calls and messages, and the same memory cap.

var (
	atLeast8  = target{"≥ 8×", 8, false}
	atLeast10 = target{"≥ 10×", 10, false}
)

// comparison is one headline row: engine W (wqhost) against engine X (Extism) on logic L,
// per call or end to end. line names its summary line; algo, for the same-algorithm rows,
// its key in the "same algorithm e2e" line.
type comparison struct {
	what   string
	l      engine.Logic
	w, x   engine.Kind
	e2e    bool
	target target
	line   string
	algo   string
}

// comparisons are the rows, the same .wasm file first.
var comparisons = []comparison{
	{what: "same .wasm, per call: Extism's own `count_vowels.wasm` (Rust PDK), unchanged, in wqhost (`abi: extism`) vs in Extism's go-sdk",
		l: engine.Vowels, w: engine.WqhostExtism, x: engine.Extism, target: atLeast8, line: "extism same wasm per call"},
	{what: "same .wasm, end to end: Extism's own `count_vowels.wasm`, unchanged, in wqhost vs in Extism's go-sdk",
		l: engine.Vowels, w: engine.WqhostExtism, x: engine.Extism, e2e: true, target: atLeast5, line: "extism same wasm e2e"},
	{what: "same .wasm, per call: the project's TinyGo Extism plugin (`examples/handlers/extism-vowels-tinygo`) in wqhost vs in Extism's go-sdk",
		l: engine.Vowels, w: engine.WqhostExtismTinyGo, x: engine.ExtismTinyGo, line: "extism same wasm tinygo per call"},
	{what: "same .wasm, end to end: `extism-vowels-tinygo` in wqhost vs in Extism's go-sdk",
		l: engine.Vowels, w: engine.WqhostExtismTinyGo, x: engine.ExtismTinyGo, e2e: true, line: "extism same wasm tinygo e2e"},
	{what: "same algorithm (each char tested against the vowel list), end to end: standard-Go guest `count-vowels-perchar-go` in wqhost vs Extism's Rust `count_vowels.wasm`",
		l: engine.Vowels, w: engine.WqhostPerChar, x: engine.Extism, e2e: true, algo: "std-go"},
	{what: "same algorithm, end to end: TinyGo guest `count-vowels-perchar-tinygo` in wqhost vs Extism's Rust `count_vowels.wasm`",
		l: engine.Vowels, w: engine.WqhostPerCharTinyGo, x: engine.Extism, e2e: true, algo: "tinygo"},
	{what: "same algorithm, same language, end to end: Rust guest `count-vowels-rust` in wqhost vs Extism's Rust `count_vowels.wasm`",
		l: engine.Vowels, w: engine.WqhostRust, x: engine.Extism, e2e: true, target: atLeast10, line: "same algorithm rust vs rust e2e", algo: "rust"},
	{what: "same algorithm, same language, per call: Rust vs Rust",
		l: engine.Vowels, w: engine.WqhostRust, x: engine.Extism, line: "same algorithm rust vs rust per call"},
	{what: "optimised handler (not the same algorithm: a 256-entry table, eight bytes a pass), end to end: standard-Go `count-vowels-go` in wqhost vs Extism's `count_vowels.wasm`",
		l: engine.Vowels, w: engine.Wqhost, x: engine.Extism, e2e: true, line: "optimised handler e2e (count-vowels-go, not the same algorithm)"},
	{what: "dispatch only, per call: Extism's `noop.wasm` (returns at once) in wqhost vs in Extism's go-sdk",
		l: engine.Noop, w: engine.WqhostExtism, x: engine.Extism, line: "dispatch only (noop.wasm) per call"},
	{what: "dispatch only, end to end: `noop.wasm` in wqhost vs in Extism's go-sdk",
		l: engine.Noop, w: engine.WqhostExtism, x: engine.Extism, e2e: true, line: "dispatch only (noop.wasm) e2e"},
}

// figures returns c's two figures (wqhost's, Extism's) and the ratio, 0 when either is missing.
func (c comparison) figures(figs []suite.Figure) (fw, fx *suite.Figure, ratio float64) {
	fw, fx = suite.FindFigure(figs, c.l, c.w), suite.FindFigure(figs, c.l, c.x)
	if fw == nil || fx == nil {
		return fw, fx, 0
	}
	if c.e2e && fw.MsgPerSec > 0 && fx.MsgPerSec > 0 {
		return fw, fx, fw.MsgPerSec / fx.MsgPerSec
	}
	if !c.e2e && fw.NsPerCall > 0 && fx.NsPerCall > 0 {
		return fw, fx, fx.NsPerCall / fw.NsPerCall
	}
	return fw, fx, 0
}

// measured is c's figure as the headline shows it.
func (c comparison) measured(figs []suite.Figure) string {
	fw, fx, x := c.figures(figs)
	if x == 0 {
		return notMeasured
	}
	if c.e2e {
		return fmt.Sprintf("**%s** (%.0f vs %.0f msg/s; %d messages each, best of %d alternating drains)", ratio(x), fw.MsgPerSec, fx.MsgPerSec, fw.Messages, fw.Rounds)
	}
	return fmt.Sprintf("**%s** (%.0f vs %.0f ns; fastest of %d alternating rounds of %s each, %d vs %d calls a round)", ratio(x), fw.NsPerCall, fx.NsPerCall, fw.CallRounds, fw.RoundTime, fw.CallsPerRound, fx.CallsPerRound)
}

// Busy says why a run's verdicts on the like-for-like targets are no verdict: the machine's
// 1-minute load average at the start was above its core count. Under load Extism's side slows
// far more than wqhost's (it allocates about 600 KB a call and runs more goroutines), so the
// ratios grow; the targets are for a quiet machine. Empty when the machine was quiet.
func Busy(m Machine) string {
	f := strings.Fields(m.LoadStart)
	var load float64
	if len(f) == 0 || m.Cores == 0 {
		return ""
	}
	if _, err := parseFloat(f[0], &load); err != nil || load <= float64(m.Cores) {
		return ""
	}
	return fmt.Sprintf("busy machine: load %s on %d cores, not a verdict", f[0], m.Cores)
}

// comparisonRows writes the like-for-like rows; on a busy machine each verdict says so.
func comparisonRows(row func(what, measured, goal, verdict string), figs []suite.Figure, busy string) {
	for _, c := range comparisons {
		_, _, x := c.figures(figs)
		verdict := c.target.holds(x)
		if busy != "" && c.target.Text != "" && x > 0 {
			verdict += " (" + busy + ")"
		}
		row(c.what, c.measured(figs), c.target.Text, verdict)
	}
}

// limitsNote says what both sides of the like-for-like rows ran under.
const limitsNote = "**Both sides of the rows above** get the same 1 KiB body, rounds of calls of the same length and the same messages a drain (memory queue, the same wqhost listener with 4 workers, 8 warm instances), in alternating rounds, each side's best kept; each side first answers the same message with the same bytes (checked). Limits: linear memory capped at 128 MiB on both (wqhost: the tenant default; Extism: manifest `memory.max_pages: 2048`), vars at 1 MiB on both (each one's default); wqhost with its default per-call time limit of 30 s (the fuel checks compiled into the module), Extism without a timeout (its manifest default: a timeout there is wazero's close-on-context-done, a goroutine per call, see `extism-timeout` below). Targets hold on a quiet machine; the machine line says how quiet this one was.\n\n"

// HeadlineLines are the summary lines of the like-for-like contests, printed by `all`,
// `headline` and BenchmarkHeadline: `extism same wasm per call: X`, `extism same wasm e2e: Y`,
// `same algorithm e2e: std-go=A tinygo=B rust=C` among them, each ratio wqhost ÷ Extism. m is
// the machine they were measured on: a verdict on a busy one says it is none (Busy).
func HeadlineLines(figs []suite.Figure, m Machine) []string {
	busy := Busy(m)
	var lines, algos []string
	for _, c := range comparisons {
		fw, fx, x := c.figures(figs)
		if c.algo != "" {
			v := notMeasured
			if x > 0 {
				v = ratio(x)
			}
			algos = append(algos, c.algo+"="+v)
		}
		if c.line == "" {
			continue
		}
		s := notMeasured
		if x > 0 {
			s = ratio(x)
			if c.e2e {
				s += fmt.Sprintf(" (%.0f vs %.0f msg/s, %d messages each", fw.MsgPerSec, fx.MsgPerSec, fw.Messages)
			} else {
				s += fmt.Sprintf(" (%.0f vs %.0f ns per call", fw.NsPerCall, fx.NsPerCall)
			}
			if c.target.Text != "" {
				s += fmt.Sprintf("; target %s: %s", c.target.Text, strings.Trim(c.target.holds(x), "*"))
				if busy != "" {
					s += " (" + busy + ")"
				}
			}
			s += ")"
		}
		lines = append(lines, c.line+": "+s)
	}
	return append(lines, "same algorithm e2e: "+strings.Join(algos, " ")+" (per-char guests in wqhost vs extism count_vowels.wasm)")
}
