// Package drain measures one workload on wqhost's local store and on what a Go user would
// reach for instead, in one run: a preloaded backlog of 100-byte messages drained by a no-op
// handler, durably and at least once (a message is removed only after its handler returned).
//
//   - wqhost: the listener with its default configuration (16 workers at most, receives of 32,
//     batched deletes) on the local store, SQLite (modernc.org/sqlite) in WAL mode with
//     synchronous=FULL (every commit fsynced, the store's default).
//   - River (github.com/riverqueue/river with riverdriver/riversqlite) on the same SQLite
//     driver with the same pragmas: WAL, synchronous=FULL, busy_timeout, immediate
//     transactions, one connection (the driver's advice), its workers doing nothing.
//   - A plain JetStream pull consumer (nats.go's jetstream package, Consume with explicit
//     acks) on an embedded nats-server with a file-backed work-queue stream, with
//     sync_always (every write fsynced, like synchronous=FULL) and with the server's default
//     (fsync every 2 minutes, like synchronous=NORMAL or weaker).
//   - wqhost's listener on its nats backend (listener/nats), on the same server settings.
//
// Round trips per message are counted where each system makes them: queue API calls for
// wqhost (each at most one transaction; the store merges concurrent ones), SQLite commits
// for River and wqhost alike (a connection hook on the modernc driver counts every commit of
// the file), and client messages sent (pull requests and acks) for JetStream.
package drain

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// Body is the payload of every message: 100 bytes.
var Body = []byte(strings.Repeat("x", 100))

// Result is one system's drain.
type Result struct {
	// System names what drained ("wqhost", "river", "jetstream"), Setup how it was set up.
	System, Setup string
	// Durability states the fsync setting the figure was measured with.
	Durability string
	Messages   int
	Elapsed    time.Duration
	// MsgPerSec is Messages / Elapsed.
	MsgPerSec float64
	// CallsPerMsg are the system's round trips per message, in Calls' unit.
	CallsPerMsg float64
	Calls       string
	// CommitsPerMsg are SQLite commits per message (SQLite stores only, else 0).
	CommitsPerMsg float64
}

// Options choose the workload.
type Options struct {
	// Dir holds the database files and the JetStream store of this run.
	Dir string
	// Messages is the backlog each system drains; default 20,000.
	Messages int
	// Workers is the handler concurrency of every system; default 16 (the listener's
	// default MaxWorkers).
	Workers int
	// Timeout bounds one drain; default 5 minutes.
	Timeout time.Duration
	// Systems names the systems Run runs (System.Name); empty means all.
	Systems []string
}

func (o *Options) defaults() {
	if o.Messages <= 0 {
		o.Messages = 20_000
	}
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
}

// System is one drain implementation.
type System struct {
	Name string
	Run  func(ctx context.Context, o Options) (Result, error)
}

// Systems are the drains compared, in the order they run.
var Systems = []System{
	{"wqhost", Local},
	{"river", River},
	{"jetstream-sync", func(ctx context.Context, o Options) (Result, error) { return JetStream(ctx, o, true) }},
	{"wqhost-nats-sync", func(ctx context.Context, o Options) (Result, error) { return JetStreamListener(ctx, o, true) }},
	{"jetstream", func(ctx context.Context, o Options) (Result, error) { return JetStream(ctx, o, false) }},
	{"wqhost-nats", func(ctx context.Context, o Options) (Result, error) { return JetStreamListener(ctx, o, false) }},
	{"jetstream-doubleack", func(ctx context.Context, o Options) (Result, error) { return JetStreamDoubleAck(ctx, o, false) }},
}

// Run drains o.Messages on every system, rounds times in alternation (a noisy machine
// slows whichever runs at the time; the best round of each is kept), and returns one
// Result per system run, in Systems' order.
func Run(ctx context.Context, o Options, rounds int, progress func(string)) ([]Result, error) {
	o.defaults()
	var run []System
	for _, s := range Systems {
		if len(o.Systems) == 0 || slices.Contains(o.Systems, s.Name) {
			run = append(run, s)
		}
	}
	if len(run) == 0 {
		return nil, fmt.Errorf("no system named %v (want some of wqhost, river, jetstream-sync, wqhost-nats-sync, jetstream, wqhost-nats, jetstream-doubleack)", o.Systems)
	}
	best := make([]Result, len(run))
	for r := range max(rounds, 1) {
		for i, s := range run {
			o := o
			o.Dir = filepath.Join(o.Dir, fmt.Sprintf("%s-%d", s.Name, r))
			res, err := s.Run(ctx, o)
			if err != nil {
				return nil, fmt.Errorf("drain on %s (round %d): %w", s.Name, r+1, err)
			}
			if progress != nil {
				progress(fmt.Sprintf("%s: %.0f msg/s", s.Name, res.MsgPerSec))
			}
			if res.MsgPerSec > best[i].MsgPerSec {
				best[i] = res
			}
		}
	}
	return best, nil
}

// commits counts SQLite commits per database file, for every connection the modernc
// driver's "sqlite" registration opens in this process.
var commits struct {
	once sync.Once
	mu   sync.Mutex
	by   map[string]*atomic.Int64
}

// commitCounter returns the commit count of the database file path, installing the
// connection hook on first use. Connections opened before the first call are not counted.
func commitCounter(path string) *atomic.Int64 {
	commits.once.Do(func() {
		commits.by = map[string]*atomic.Int64{}
		sqlite.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, dsn string) error {
			h, ok := c.(sqlite.HookRegisterer)
			if !ok {
				return nil
			}
			n := counterFor(dsnPath(dsn))
			h.RegisterCommitHook(func() int32 { n.Add(1); return 0 })
			return nil
		})
	})
	return counterFor(path)
}

func counterFor(path string) *atomic.Int64 {
	commits.mu.Lock()
	defer commits.mu.Unlock()
	n, ok := commits.by[path]
	if !ok {
		n = new(atomic.Int64)
		commits.by[path] = n
	}
	return n
}

// dsnPath is the file of a "file:path?query" DSN.
func dsnPath(dsn string) string {
	p, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if u, err := url.PathUnescape(p); err == nil {
		return u
	}
	return p
}

// waitFor polls done every millisecond until it reports true, ctx ends or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, done func() bool, what func() string) error {
	deadline := time.Now().Add(timeout)
	for !done() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not drained within %s: %s", timeout, what())
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func result(system, setup, durability string, n int, elapsed time.Duration, calls float64, unit string, commits int64) Result {
	return Result{
		System: system, Setup: setup, Durability: durability, Messages: n, Elapsed: elapsed,
		MsgPerSec: float64(n) / elapsed.Seconds(), CallsPerMsg: calls / float64(n), Calls: unit,
		CommitsPerMsg: float64(commits) / float64(n),
	}
}

// Find returns the result of the named system (Result.System: "wqhost", "river",
// "jetstream", "wqhost-nats"), for the JetStream ones with sync_always or without, or nil.
func Find(rows []Result, system string, syncAlways bool) *Result {
	for i := range rows {
		r := &rows[i]
		nats := strings.HasPrefix(r.Durability, "file store")
		if r.System == system && (!nats || strings.Contains(r.Durability, "sync_always") == syncAlways) {
			return r
		}
	}
	return nil
}

// Lines are the summary lines the Performance issue quotes:
//
//	local drain msg/s: wqhost=A river=B (A/B=R×)
//	jetstream drain msg/s: sync_always=C default=D; wqhost/jetstream(sync_always)=S×
func Lines(rows []Result) []string {
	var out []string
	w, r := Find(rows, "wqhost", false), Find(rows, "river", false)
	if w != nil && r != nil {
		out = append(out, fmt.Sprintf("local drain msg/s: wqhost=%.0f river=%.0f (A/B=%.2f×); round trips/msg: wqhost %.3f queue calls (%.4f commits), river %.4f commits",
			w.MsgPerSec, r.MsgPerSec, w.MsgPerSec/r.MsgPerSec, w.CallsPerMsg, w.CommitsPerMsg, r.CommitsPerMsg))
	}
	js, jd := Find(rows, "jetstream", true), Find(rows, "jetstream", false)
	if js != nil && jd != nil {
		line := fmt.Sprintf("jetstream drain msg/s: sync_always=%.0f default=%.0f; client messages/msg %.3f and %.3f", js.MsgPerSec, jd.MsgPerSec, js.CallsPerMsg, jd.CallsPerMsg)
		if w != nil {
			line += fmt.Sprintf("; wqhost/jetstream(sync_always)=%.2f×", w.MsgPerSec/js.MsgPerSec)
		}
		out = append(out, line)
	}
	ns, nd := Find(rows, "wqhost-nats", true), Find(rows, "wqhost-nats", false)
	if ns != nil && nd != nil {
		out = append(out, fmt.Sprintf("wqhost listener on the nats backend msg/s: sync_always=%.0f default=%.0f; client messages/msg %.3f and %.3f", ns.MsgPerSec, nd.MsgPerSec, ns.CallsPerMsg, nd.CallsPerMsg))
	}
	if l := natsLine(rows); l != "" {
		out = append(out, l)
	}
	return out
}
