package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/suite"
)

// common are the flags every measuring command takes.
type common struct {
	repo, extismWasm, cacheDir, dataDir, azureConn string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.repo, "repo", "", "wqhost checkout holding examples/handlers (default: found above the working directory)")
	fs.StringVar(&c.extismWasm, "extism-wasm", "", "folder with Extism's prebuilt plugins (default: wasm/ of the github.com/extism/go-sdk module, found with go list -m)")
	fs.StringVar(&c.cacheDir, "cache-dir", "", "wazero compilation cache shared by all engines (default: <user cache>/wqhost-bench/wazero)")
	fs.StringVar(&c.dataDir, "data-dir", "", "directory for the local backend's SQLite files (default: a temporary directory)")
	fs.StringVar(&c.azureConn, "azure-connection-string", "", "use this Azure Queue Storage account instead of starting Azurite from tools/azurite")
}

// open resolves the paths and returns the module paths and the stores (close them).
func (c *common) open() (engine.Paths, *suite.Stores, func(), error) {
	var p engine.Paths
	var err error
	if p.Repo = c.repo; p.Repo == "" {
		if p.Repo, err = engine.FindRepo("."); err != nil {
			return p, nil, nil, err
		}
	}
	if p.ExtismWasm = c.extismWasm; p.ExtismWasm == "" {
		if p.ExtismWasm, err = engine.FindExtismWasm(filepath.Join(p.Repo, "bench")); err != nil {
			return p, nil, nil, err
		}
	}
	if p.CacheDir = c.cacheDir; p.CacheDir == "" {
		if p.CacheDir, err = defaultCacheDir(); err != nil {
			return p, nil, nil, err
		}
	}
	dir, cleanDir := c.dataDir, func() {}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "wqbench-"); err != nil {
			return p, nil, nil, err
		}
		cleanDir = func() { os.RemoveAll(dir) }
	}
	st := &suite.Stores{Dir: dir, Repo: p.Repo, AzureConnectionString: c.azureConn}
	return p, st, func() { st.Close(); cleanDir() }, nil
}

func bar(n int64, desc string, w io.Writer) *progressbar.ProgressBar {
	return progressbar.NewOptions64(n,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
	)
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "Preloads a queue, drains it with a consumer whose handler runs one logic on one\nengine, and prints msg/s, handler latency p50/p99, queue calls per message, host CPU\n(getrusage) and RSS.", stderr)
	var c common
	c.register(fs)
	var o suite.RunOptions
	var backend, cons, eng, logic string
	fs.StringVar(&backend, "backend", "local", "queue backend: memory, local (durable SQLite) or azurite")
	fs.StringVar(&cons, "consumer", string(consumer.Listener), "consumer: wqhost-listener, naive-loop (receive 1/process/delete) or poller-1s")
	fs.StringVar(&eng, "engine", string(engine.Wqhost), "handler engine: go, wqhost, wqhost-notimeout, wqhost-rust, wqhost-tinygo, wqhost-perchar, wqhost-perchar-tinygo, wqhost-extism (Extism's plugin in wqhost), wqhost-extism-tinygo, extism, extism-tinygo, extism-timeout or instantiate")
	fs.StringVar(&logic, "handler", string(engine.Noop), "handler logic: noop, vowels (CPU-heavy: count vowels over the body) or billing (JSON transform)")
	fs.IntVar(&o.Messages, "messages", 10000, "messages to preload and drain")
	fs.IntVar(&o.Size, "size", 256, "message body size in bytes (billing uses real transactions)")
	fs.IntVar(&o.Workers, "workers", 4, "listener max workers (naive loop: goroutines)")
	fs.IntVar(&o.Instances, "instances", 8, "warm handler instances (concurrent handler calls)")
	fs.BoolVar(&o.Push, "push", true, "let the listener wait on the backend instead of polling where it can (memory, local)")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "give up if the queue is not drained by then")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Backend, o.Consumer, o.Engine, o.Logic = suite.Backend(backend), consumer.Kind(cons), engine.Kind(eng), engine.Logic(logic)
	paths, stores, done, err := c.open()
	if err != nil {
		return err
	}
	defer done()
	b := bar(int64(o.Messages), fmt.Sprintf("%s/%s/%s", o.Backend, o.Engine, o.Logic), stderr)
	o.Progress = func(n int64) { _ = b.Set64(n) }
	res, err := suite.Run(ctx, stores, paths, o)
	_ = b.Finish()
	printRun(stdout, res)
	return err
}

func printRun(w io.Writer, r suite.RunResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "backend\t%s\n", r.Backend)
	fmt.Fprintf(tw, "consumer\t%s (workers %d, push %v)\n", r.Consumer, r.Workers, r.Push)
	fmt.Fprintf(tw, "handler\t%s on %s (%d instances), %d B bodies\n", r.Logic, r.Engine, r.Instances, r.Size)
	fmt.Fprintf(tw, "messages\t%d handled (%d rejected) in %.2f s\n", r.Handled, r.Rejected, r.Seconds)
	fmt.Fprintf(tw, "throughput\t%.0f msg/s\n", r.MsgPerSec)
	fmt.Fprintf(tw, "handler latency\tp50 %s, p99 %s\n", r.P50, r.P99)
	fmt.Fprintf(tw, "queue calls\t%.3f per message (%d receives, %d empty, %d deletes, %d batch deletes, %d visibility updates, %d depth, %d waits)\n",
		r.CallsPerMsg, r.Calls.Receive, r.Calls.EmptyReceive, r.Calls.Delete, r.Calls.DeleteBatch, r.Calls.Update, r.Calls.Depth, r.Calls.Wait)
	if r.HTTPRequests > 0 {
		fmt.Fprintf(tw, "storage requests\t%d HTTP requests (retries included), %d unanswered attempts\n", r.HTTPRequests, r.HTTPUnanswered)
	}
	if r.TimedOut {
		fmt.Fprintf(tw, "TIMED OUT\tthe figures cover the messages handled before the timeout\n")
	}
	fmt.Fprintf(tw, "host CPU\t%.2f s (%.0f%% of one core)\n", r.CPUSeconds, r.CPUPercent)
	fmt.Fprintf(tw, "RSS\t%.1f MiB\n", float64(r.RSSBytes)/(1<<20))
	tw.Flush()
}

func cmdPerCall(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("percall", "Times back-to-back handler calls from one goroutine on every engine, in one process,\nand prints ns/call, allocations, p50/p99 and the ratios against wqhost's pool.", stderr)
	var c common
	c.register(fs)
	var logics, engines string
	var o suite.PerCallOptions
	fs.StringVar(&logics, "handlers", "noop,vowels,billing", "handler logics to compare")
	fs.StringVar(&engines, "engines", "go,wqhost,wqhost-notimeout,wqhost-rust,extism,instantiate", "engines to compare")
	fs.IntVar(&o.BodySize, "size", 1024, "body size in bytes for noop and vowels")
	fs.DurationVar(&o.Duration, "duration", 2*time.Second, "measuring time per engine and handler")
	if err := fs.Parse(args); err != nil {
		return err
	}
	paths, _, done, err := c.open()
	if err != nil {
		return err
	}
	defer done()
	o.Paths = paths
	for _, l := range splitList(logics) {
		o.Logics = append(o.Logics, engine.Logic(l))
	}
	for _, k := range splitList(engines) {
		o.Engines = append(o.Engines, engine.Kind(k))
	}
	o.Progress = func(r suite.PerCallRow) {
		fmt.Fprintf(stderr, "  %-8s %-17s %12.0f ns/call\n", r.Logic, r.Engine, r.NsPerCall)
	}
	rows, err := suite.MeasurePerCall(ctx, o)
	printPerCall(stdout, rows)
	return err
}

func printPerCall(w io.Writer, rows []suite.PerCallRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "handler\tengine\tns/call\tallocs/call\tp50\tp99\tvs wqhost\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%s\t%s\t%s\t\n", r.Logic, r.Engine, r.NsPerCall, r.AllocsPerOp, r.P50, r.P99, vsWqhost(rows, r))
	}
	tw.Flush()
}

// vsWqhost says how r compares with wqhost's pool on the same logic.
func vsWqhost(rows []suite.PerCallRow, r suite.PerCallRow) string {
	x := suite.Ratio(rows, r.Logic, r.Engine, engine.Wqhost)
	switch {
	case x == 0 || r.Engine == engine.Wqhost:
		return "-"
	case x >= 1:
		return fmt.Sprintf("%.1fx slower", x)
	default:
		return fmt.Sprintf("%.1fx faster", 1/x)
	}
}

func cmdIdle(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("idle", "Handles a burst, then counts each consumer's queue calls while its queue stays empty\n(all consumers at once, each on its own queue).", stderr)
	var c common
	c.register(fs)
	var o suite.IdleOptions
	var backend string
	fs.StringVar(&backend, "backend", "local", "queue backend: memory, local or azurite")
	fs.DurationVar(&o.Window, "window", time.Minute, "idle time observed")
	fs.IntVar(&o.Workers, "workers", 4, "listener max workers / naive loop goroutines")
	fs.IntVar(&o.Burst, "burst", 200, "messages handled before the idle window")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Backend = suite.Backend(backend)
	_, stores, done, err := c.open()
	if err != nil {
		return err
	}
	defer done()
	fmt.Fprintf(stderr, "watching idle queues for %s ...\n", o.Window)
	rows, err := suite.MeasureIdle(ctx, stores, o)
	printIdle(stdout, rows)
	return err
}

func printIdle(w io.Writer, rows []suite.IdleRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\tconsumer\tbilled calls\twaits\tper hour")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d in %.0f s\t%d\t%.0f\n", r.Backend, r.Consumer, r.Calls.Transactions, r.Seconds, r.Calls.Wait, r.PerHour)
	}
	tw.Flush()
}
