package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/drain"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/report"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// allOptions scale the full run.
type allOptions struct {
	out         string
	perCall     time.Duration
	idleWindow  time.Duration
	scale       float64
	backends    []suite.Backend
	workers     []int
	sizes       []int
	e2eSeconds  float64
	instances   int
	skipAzurite bool
	// drainMessages and drainRounds size the local drain comparison (0 messages skips it).
	drainMessages, drainRounds int
	// densitySizes are the bindings sweep's sizes (none skips it), densityIdle its idle wait.
	densitySizes []int
	densityIdle  time.Duration
	// timeLimit runs the runtime's fuel benchmarks for the time limit's cost.
	timeLimit bool
	// headline sizes the like-for-like contests (0 messages skips them).
	headline suite.HeadlineOptions
}

func cmdAll(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("all", "Runs every comparison in one process and writes <out>/benchmarks.md, the PNG charts\nin <out>/img and the raw numbers in <out>/img/results.json.", stderr)
	var c common
	c.register(fs)
	var o allOptions
	var workers, sizes string
	fs.StringVar(&o.out, "out", "../docs", "docs directory to write")
	fs.DurationVar(&o.perCall, "percall-duration", time.Second, "measuring time per engine and handler in the per-call comparison")
	fs.DurationVar(&o.idleWindow, "idle-window", time.Minute, "idle time observed per consumer (all at once)")
	fs.Float64Var(&o.scale, "scale", 1, "multiplies every message count (0.2 for a quick look)")
	fs.Float64Var(&o.e2eSeconds, "e2e-seconds", 3, "target length of each end-to-end engine run; message counts follow from the per-call cost")
	fs.IntVar(&o.instances, "instances", 8, "warm handler instances per run")
	fs.StringVar(&workers, "workers", "1,2,4,8,16,32,64", "max-worker counts of the scaling curve")
	fs.StringVar(&sizes, "sizes", "100,1024,4096,16384,65536", "message sizes of the size sweep, bytes")
	fs.BoolVar(&o.skipAzurite, "skip-azurite", false, "leave out the Azurite rows")
	fs.IntVar(&o.drainMessages, "drain-messages", 20000, "backlog of the local drain comparison (wqhost, River, JetStream); 0 skips it")
	fs.IntVar(&o.drainRounds, "drain-rounds", 2, "alternating rounds of the drain comparison; the best of each system is kept")
	var density string
	fs.StringVar(&density, "density", "100,1000,10000", "binding counts of the bindings sweep (host's BenchmarkDensity); empty skips it")
	fs.DurationVar(&o.densityIdle, "density-idle", 10*time.Second, "idle wait of each bindings-sweep size before its resident memory is read")
	fs.IntVar(&o.headline.Messages, "headline-messages", 20000, "messages per drain of the headline's like-for-like contests, the same for every engine; 0 skips them")
	fs.IntVar(&o.headline.Rounds, "headline-rounds", 5, "alternating drains per engine in the headline's contests (the best is kept)")
	fs.BoolVar(&o.timeLimit, "time-limit", true, "measure the time limit's cost with the runtime's fuel benchmarks (go test in the checkout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.workers, err = ints(workers); err != nil {
		return fmt.Errorf("--workers: %w", err)
	}
	if o.sizes, err = ints(sizes); err != nil {
		return fmt.Errorf("--sizes: %w", err)
	}
	if o.densitySizes, err = ints(density); err != nil {
		return fmt.Errorf("--density: %w", err)
	}
	o.backends = []suite.Backend{suite.Local}
	if !o.skipAzurite {
		o.backends = append(o.backends, suite.Azurite)
	}
	paths, stores, done, err := c.open()
	if err != nil {
		return err
	}
	defer done()
	res, err := measureAll(ctx, paths, stores, o, stderr)
	if err != nil {
		return err
	}
	res.Command = "cd bench && go run . all " + strings.Join(args, " ")
	return writeOut(o.out, res, stdout)
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func measureAll(ctx context.Context, paths engine.Paths, stores *suite.Stores, o allOptions, log io.Writer) (*report.Results, error) {
	res := &report.Results{Machine: report.Describe(), Started: time.Now().UTC()}
	step := func(format string, a ...any) { fmt.Fprintf(log, "== "+format+"\n", a...) }
	note := func(err error, what string) {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: %v", what, err))
		fmt.Fprintf(log, "!! %s: %v\n", what, err)
	}
	count := func(n int) int { return max(int(float64(n)*o.scale), 50) }
	run := func(ro suite.RunOptions) (suite.RunResult, error) {
		if ro.Instances == 0 {
			ro.Instances = o.instances
		}
		b := bar(int64(ro.Messages), fmt.Sprintf("%-8s %-16s %-12s %-8s w=%-2d %6dB", ro.Backend, ro.Consumer, ro.Engine, ro.Logic, ro.Workers, ro.Size), log)
		ro.Progress = func(n int64) { _ = b.Set64(n) }
		if ro.Backend == suite.Azurite {
			// A stalled emulator must not hold the whole run hostage; the row keeps what
			// was done and says it timed out.
			ro.Timeout = 90 * time.Second
		}
		r, err := suite.Run(ctx, stores, paths, ro)
		_ = b.Finish()
		if errors.Is(err, suite.ErrTimedOut) {
			note(err, fmt.Sprintf("%s %s w=%d", ro.Backend, ro.Consumer, ro.Workers))
			err = nil
		}
		if err == nil {
			fmt.Fprintf(log, "   %-8s %-16s %-12s %-8s w=%-2d %6dB  %8.0f msg/s  %.3f calls/msg\n", ro.Backend, ro.Consumer, ro.Engine, ro.Logic, ro.Workers, ro.Size, r.MsgPerSec, r.CallsPerMsg)
		}
		return r, err
	}

	fmt.Fprintln(log, report.MachineLine(res.Machine, "", 0))

	// 0. The headline's like-for-like contests, first, while the run's own work has not yet
	// warmed the machine.
	if o.headline.Messages > 0 {
		step("headline: like-for-like contests (%d messages a drain, %d rounds)", count(o.headline.Messages), o.headline.Rounds)
		ho := o.headline
		ho.Paths, ho.Stores, ho.Messages = paths, stores, count(ho.Messages)
		figs, err := measureHeadline(ctx, ho, log)
		if err != nil {
			note(err, "headline contests")
		}
		res.Headline = figs
		for _, l := range report.HeadlineLines(figs, res.Machine) {
			fmt.Fprintln(log, "   "+l)
		}
	}

	// 1. Per-call cost, one goroutine, every engine, in this process.
	step("per-call cost (%s per engine and handler)", o.perCall)
	pc, err := suite.MeasurePerCall(ctx, suite.PerCallOptions{
		Paths: paths, Logics: engine.Logics, Engines: engine.Kinds, BodySize: 1024, Duration: o.perCall,
		Progress: func(r suite.PerCallRow) {
			fmt.Fprintf(log, "   %-8s %-17s %12.0f ns/call\n", r.Logic, r.Engine, r.NsPerCall)
		},
	})
	res.PerCall = pc
	if err != nil {
		return res, err
	}

	// 2. End to end, same listener and in-memory queue, each engine running the same logic:
	// the host's cost shows, the store's does not.
	step("end to end by engine (memory backend, wqhost listener, 4 workers)")
	for _, l := range engine.Logics {
		for _, k := range engine.Kinds {
			if k == engine.ExtismTimeout {
				continue // per-call only: the end-to-end runs compare each side's default
			}
			ns := perCallNs(pc, l, k)
			if ns == 0 {
				continue // no module for this pair
			}
			// Enough messages for about e2eSeconds on two cores, within sane bounds.
			n := int(o.e2eSeconds * 2e9 / ns)
			n = count(min(max(n, 200), 30000))
			r, err := run(suite.RunOptions{Backend: suite.Memory, Consumer: consumer.Listener, Engine: k, Logic: l, Messages: n, Size: 1024, Workers: 4, Push: true})
			if err != nil {
				note(err, fmt.Sprintf("end to end %s on %s", l, k))
				continue
			}
			res.Engines = append(res.Engines, r)
		}
	}

	// 3. Consumers: listener vs naive loop vs 1 s poller, same handler, per backend.
	for _, b := range o.backends {
		step("consumers on %s", b)
		n := map[suite.Backend]int{suite.Local: 5000, suite.Azurite: 1500}[b]
		for _, k := range consumer.Kinds {
			r, err := run(suite.RunOptions{Backend: b, Consumer: k, Engine: engine.Wqhost, Logic: engine.Noop, Messages: count(n), Size: 256, Workers: 4, Push: b != suite.Azurite})
			if err != nil {
				note(err, fmt.Sprintf("consumer %s on %s", k, b))
				continue
			}
			res.Consumers = append(res.Consumers, r)
		}
	}

	// 4. Scaling curve: msg/s against max workers.
	for _, b := range o.backends {
		step("scaling curve on %s", b)
		// Long enough that the scale-up (depth checked at most once a second) is not the
		// whole run.
		n := map[suite.Backend]int{suite.Local: 20000, suite.Azurite: 2000}[b]
		for _, w := range o.workers {
			r, err := run(suite.RunOptions{Backend: b, Consumer: consumer.Listener, Engine: engine.Wqhost, Logic: engine.Noop, Messages: count(n), Size: 256, Workers: w, Push: b != suite.Azurite})
			if err != nil {
				note(err, fmt.Sprintf("scaling %s workers=%d", b, w))
				continue
			}
			res.Scaling = append(res.Scaling, r)
		}
	}

	// 5. Size sweep on the local backend, no-op and CPU-heavy handlers.
	step("message size sweep (local backend)")
	for _, l := range []engine.Logic{engine.Noop, engine.Vowels} {
		for _, size := range o.sizes {
			n := min(max((64<<20)/size, 500), 4000)
			if l == engine.Vowels {
				n = min(max((16<<20)/size, 250), 3000)
			}
			r, err := run(suite.RunOptions{Backend: suite.Local, Consumer: consumer.Listener, Engine: engine.Wqhost, Logic: l, Messages: count(n), Size: size, Workers: 4, Push: true})
			if err != nil {
				note(err, fmt.Sprintf("size %d %s", size, l))
				continue
			}
			res.Sizes = append(res.Sizes, r)
		}
	}

	// 6. Idle: every consumer on every backend at once, each on its own queue.
	step("idle queue calls (%s window, all consumers at once)", o.idleWindow)
	type idleOut struct {
		rows []suite.IdleRow
		err  error
		b    suite.Backend
	}
	ch := make(chan idleOut, len(o.backends))
	for _, b := range o.backends {
		go func() {
			io := suite.IdleOptions{Backend: b, Window: o.idleWindow, Workers: 4}
			rows, err := suite.MeasureIdle(ctx, stores, io)
			if err != nil && ctx.Err() == nil {
				// One more try: Azurite has been seen to stop answering for a while.
				fmt.Fprintf(log, "!! idle on %s: %v; trying once more\n", b, err)
				rows, err = suite.MeasureIdle(ctx, stores, io)
			}
			ch <- idleOut{rows, err, b}
		}()
	}
	for range o.backends {
		out := <-ch
		if out.err != nil {
			note(out.err, fmt.Sprintf("idle on %s", out.b))
			continue
		}
		res.Idle = append(res.Idle, out.rows...)
	}
	// 7. The local drain against River and JetStream.
	if o.drainMessages > 0 {
		step("local drain: wqhost vs River vs JetStream (%d messages, %d rounds)", count(o.drainMessages), o.drainRounds)
		d, err := drain.Run(ctx, drain.Options{Dir: filepath.Join(stores.Dir, "drain"), Messages: count(o.drainMessages)}, o.drainRounds,
			func(s string) { fmt.Fprintln(log, "   "+s) })
		if err != nil {
			note(err, "local drain comparison")
		}
		res.Drain = d.Rows
		if d.Fsync.PerSec > 0 {
			res.DrainFsync = &d.Fsync
		}
		if d.LoadStart != "" {
			res.DrainLoad = []string{d.LoadStart, d.LoadEnd}
		}
		for _, l := range drain.Lines(d) {
			fmt.Fprintln(log, "   "+l)
		}
	}

	// 8. The time limit's cost, from the runtime's fuel benchmarks.
	if o.timeLimit {
		step("time limit cost (runtime fuel benchmarks)")
		tl, err := measureTimeLimit(ctx, paths.Repo)
		if err != nil {
			note(err, "time limit cost")
		}
		res.TimeLimit = tl
		micro, realistic, heavy := tl.Figures()
		fmt.Fprintf(log, "   micro loops max %.2f×, realistic guests max %.2f×, go heavy %.2f× (medians of the runs; 0: not measured)\n", micro, realistic, heavy)
	}

	// 9. The bindings sweep, from the host's density benchmark.
	if len(o.densitySizes) > 0 {
		step("bindings sweep (host BenchmarkDensity, sizes %v)", o.densitySizes)
		rows, err := measureDensity(ctx, paths.Repo, o.densitySizes, o.densityIdle.String())
		if err != nil {
			note(err, "bindings sweep")
		}
		res.Density = rows
	}
	res.Finished = time.Now().UTC()
	res.LoadAfter = report.LoadAverage()
	res.CalibrationAfter = report.Calibrate()
	fmt.Fprintln(log, report.MachineLine(res.Machine, res.LoadAfter, res.CalibrationAfter))
	for _, l := range report.HeadlineLines(res.Headline, res.Machine) {
		fmt.Fprintln(log, l)
	}
	return res, nil
}

func perCallNs(rows []suite.PerCallRow, l engine.Logic, k engine.Kind) float64 {
	for _, r := range rows {
		if r.Logic == l && r.Engine == k {
			return r.NsPerCall
		}
	}
	return 0
}

func writeOut(out string, res *report.Results, stdout io.Writer) error {
	img := filepath.Join(out, "img")
	if err := os.MkdirAll(img, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(img, "results.json"), b, 0o644); err != nil {
		return err
	}
	return render(out, res, stdout)
}

func render(out string, res *report.Results, stdout io.Writer) error {
	charts, err := report.Charts(res, filepath.Join(out, "img"))
	if err != nil {
		return err
	}
	md := filepath.Join(out, "benchmarks.md")
	old, err := os.ReadFile(md)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(md, []byte(report.WithHandWritten(report.Markdown(res, charts), string(old))), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s, %d charts and %s\n", md, len(charts), filepath.Join(out, "img", "results.json"))
	return nil
}

func cmdCharts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("charts", "Re-renders <out>/benchmarks.md and the charts from <out>/img/results.json without\nmeasuring again.", stderr)
	out := fs.String("out", "../docs", "docs directory holding img/results.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(*out, "img", "results.json"))
	if err != nil {
		return err
	}
	var res report.Results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(*out, "img", "results.json"), err)
	}
	return render(*out, &res, stdout)
}
