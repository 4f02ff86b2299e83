package suite

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/engine"
)

// A Contest is a set of engines running one logic, measured together in alternating rounds
// with the same body, rounds of calls of the same length and the same number of messages per
// drain on every engine: the headline comparisons (docs/benchmarks.md) are ratios of its
// figures.
type Contest struct {
	Logic   engine.Logic  `json:"logic"`
	Engines []engine.Kind `json:"engines"`
}

// HeadlineContests are the contests the headline rows read: Extism's count_vowels.wasm and
// the engines compared with it (the same file in wqhost; the same per-char algorithm in
// standard Go, TinyGo and Rust; the optimised table handler), the project's TinyGo Extism
// plugin in both hosts, and Extism's noop.wasm in both (dispatch only).
var HeadlineContests = []Contest{
	{engine.Vowels, []engine.Kind{engine.Extism, engine.WqhostExtism, engine.WqhostPerChar, engine.WqhostPerCharTinyGo, engine.WqhostRust, engine.Wqhost}},
	{engine.Vowels, []engine.Kind{engine.ExtismTinyGo, engine.WqhostExtismTinyGo}},
	{engine.Noop, []engine.Kind{engine.Extism, engine.WqhostExtism}},
}

// Figure is one engine's result in a contest.
type Figure struct {
	Logic  engine.Logic `json:"logic"`
	Engine engine.Kind  `json:"engine"`
	// NsPerCall is the fastest round's time per call, one goroutine calling.
	NsPerCall float64 `json:"ns_per_call"`
	// MsgPerSec is the best drain's rate (memory queue, wqhost listener, 4 workers).
	MsgPerSec float64 `json:"msg_per_sec"`
	// Messages per drain, Rounds of drains, CallRounds rounds of calls each about RoundTime
	// long: the same for every engine of the contest. CallsPerRound is this engine's calls a
	// round, as many as fill RoundTime at its pace.
	Messages      int           `json:"messages"`
	Rounds        int           `json:"rounds"`
	CallRounds    int           `json:"call_rounds"`
	RoundTime     time.Duration `json:"round_time_ns"`
	CallsPerRound int           `json:"calls_per_round"`
}

// HeadlineOptions size MeasureHeadline.
type HeadlineOptions struct {
	Paths    engine.Paths
	Stores   *Stores
	Contests []Contest
	BodySize int // bytes of text (default 1024)
	// CallRounds rounds of about RoundTime of calls per engine for the per-call figure (10,
	// 200 ms). Rounds of the same length, not of the same calls: on a shared machine the
	// fastest of short rounds is likelier to miss the other jobs than the fastest of long
	// ones, which would favour the faster engine.
	CallRounds int
	RoundTime  time.Duration
	// Rounds drains of Messages per engine for the end-to-end figure (5, 20000).
	Rounds, Messages int
	// Progress, if set, is told what is being measured.
	Progress func(string)
}

func (o *HeadlineOptions) defaults() {
	if o.BodySize <= 0 {
		o.BodySize = 1024
	}
	if o.CallRounds <= 0 {
		o.CallRounds = 10
	}
	if o.RoundTime <= 0 {
		o.RoundTime = 200 * time.Millisecond
	}
	if o.Rounds <= 0 {
		o.Rounds = 5
	}
	if o.Messages <= 0 {
		o.Messages = 20000
	}
	if o.Contests == nil {
		o.Contests = HeadlineContests
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
}

// MeasureHeadline runs each contest: it checks that every engine gives the same output for
// the same first message (fresh instances, so running totals agree), then times calls in
// alternating rounds of the same length (each engine's fastest round kept: on a shared
// machine a round is slowed by whatever else runs, and alternating exposes every engine to
// the same moments), then
// drains the same number of messages through the wqhost listener on a memory queue in
// alternating rounds, keeping each engine's best.
func MeasureHeadline(ctx context.Context, o HeadlineOptions) ([]Figure, error) {
	o.defaults()
	var figs []Figure
	for _, c := range o.Contests {
		f, err := measureContest(ctx, o, c)
		figs = append(figs, f...)
		if err != nil {
			return figs, err
		}
	}
	return figs, nil
}

func measureContest(ctx context.Context, o HeadlineOptions, c Contest) ([]Figure, error) {
	body := SampleBody(c.Logic, o.BodySize)
	callers := make([]engine.Caller, len(c.Engines))
	defer func() {
		for _, cl := range callers {
			if cl != nil {
				_ = cl.Close(ctx)
			}
		}
	}()
	var first []byte
	for i, k := range c.Engines {
		cl, err := engine.Open(ctx, k, c.Logic, 1, o.Paths)
		if err != nil {
			return nil, fmt.Errorf("headline %s: %w", c.Logic, err)
		}
		callers[i] = cl
		out, err := cl.Call(ctx, body)
		if err != nil {
			return nil, fmt.Errorf("headline %s on %s: first call: %w", c.Logic, k, err)
		}
		if i > 0 && !bytes.Equal(out, first) {
			return nil, fmt.Errorf("headline %s: %s answered %q where %s answered %q: not the same work", c.Logic, k, out, c.Engines[0], first)
		}
		first = out
	}
	figs := make([]Figure, len(c.Engines))
	best := make([]time.Duration, len(c.Engines))
	calls := func(i, n int) (time.Duration, error) {
		start := time.Now()
		for range n {
			if _, err := callers[i].Call(ctx, body); err != nil {
				return 0, fmt.Errorf("headline %s on %s: %w", c.Logic, c.Engines[i], err)
			}
		}
		return time.Since(start), nil
	}
	for i, k := range c.Engines {
		// The pace, from a short warm-up, sets how many calls fill a round.
		const warm = 20
		d, err := calls(i, warm)
		if err != nil {
			return nil, err
		}
		n := int(min(max(int64(o.RoundTime)*warm/max(int64(d), 1), 1), 1<<22))
		figs[i] = Figure{Logic: c.Logic, Engine: k, Messages: o.Messages, Rounds: o.Rounds, CallRounds: o.CallRounds, RoundTime: o.RoundTime, CallsPerRound: n}
		best[i] = 1 << 62
	}
	o.Progress(fmt.Sprintf("%s per call: %d alternating rounds of about %s on %v", c.Logic, o.CallRounds, o.RoundTime, c.Engines))
	for range o.CallRounds {
		for i := range callers {
			d, err := calls(i, figs[i].CallsPerRound)
			if err != nil {
				return nil, err
			}
			best[i] = min(best[i], d)
		}
	}
	for i := range figs {
		figs[i].NsPerCall = float64(best[i].Nanoseconds()) / float64(figs[i].CallsPerRound)
	}
	// The drains open engines of their own (8 instances, as every end-to-end run).
	for _, cl := range callers {
		_ = cl.Close(ctx)
	}
	clear(callers)
	o.Progress(fmt.Sprintf("%s end to end: %d alternating drains of %d messages on %v", c.Logic, o.Rounds, o.Messages, c.Engines))
	for range o.Rounds {
		for i, k := range c.Engines {
			r, err := Run(ctx, o.Stores, o.Paths, RunOptions{Backend: Memory, Consumer: consumer.Listener,
				Engine: k, Logic: c.Logic, Messages: o.Messages, Size: o.BodySize, Workers: 4, Push: true, Timeout: 5 * time.Minute})
			if err != nil {
				return figs, fmt.Errorf("headline %s end to end on %s: %w", c.Logic, k, err)
			}
			figs[i].MsgPerSec = max(figs[i].MsgPerSec, r.MsgPerSec)
		}
	}
	return figs, nil
}

// FindFigure is the figure of engine k for logic l, nil when figs has none.
func FindFigure(figs []Figure, l engine.Logic, k engine.Kind) *Figure {
	for i := range figs {
		if figs[i].Logic == l && figs[i].Engine == k {
			return &figs[i]
		}
	}
	return nil
}
