// Package drain measures one workload on wqhost's local store and on what a Go user would
// reach for instead, in one run: a preloaded backlog of 100-byte messages drained by a no-op
// handler, durably and at least once (a message is removed only after its handler returned).
//
//   - wqhost: the listener with its default configuration (16 workers at most, receives of 32,
//     batched deletes) on the local store, SQLite (modernc.org/sqlite) in WAL mode with
//     synchronous=FULL (every commit fsynced, the store's default).
//   - River (github.com/riverqueue/river v0.51.2) where its users run it, on PostgreSQL
//     (riverpgxv5; a throwaway cluster on a loopback port, fsync and synchronous_commit on),
//     and on SQLite (riversqlite) with the local store's driver and pragmas: WAL,
//     synchronous=FULL, busy_timeout, immediate transactions, one connection (the driver's
//     advice). Both run as River's own benchmark runs it (2,000 workers, 2 ms fetch
//     cooldown, 20 ms poll), their workers doing nothing.
//   - A plain JetStream pull consumer (nats.go's jetstream package, Consume with explicit
//     acks) on an embedded nats-server with a file-backed work-queue stream, with
//     sync_always (every write fsynced, like synchronous=FULL) and with the server's default
//     (fsync every 2 minutes, like synchronous=NORMAL or weaker).
//   - wqhost's listener on its nats backend (listener/nats), on the same server settings.
//
// Round trips per message are counted where each system makes them: queue API calls for
// wqhost (each at most one transaction; the store merges concurrent ones), SQLite commits
// for River and wqhost alike (a connection hook on the modernc driver counts every commit of
// the file), the server's committed transactions and WAL flushes for PostgreSQL, and client
// messages sent (pull requests and acks) for JetStream.
//
// Beside the drains, the disk's fsync rate is measured before each one, in the same directory
// (ProbeFsync): a store's disk syncs per second over that rate is how close it runs to what
// the disk allows; far below 1, the store is bound by its CPU cost, not by the disk.
package drain

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Body is the payload of every message: 100 bytes.
var Body = []byte(strings.Repeat("x", 100))

// Result is one system's drain.
type Result struct {
	// System names what drained: "wqhost", "river-postgres", "river-sqlite", "jetstream" or
	// "wqhost-nats" (the last two with either sync setting); Setup says how it was set up.
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
	// CommitsPerMsg are committed transactions per message: SQLite commits, or PostgreSQL's
	// (pg_stat_database.xact_commit); 0 where not counted.
	CommitsPerMsg float64
	// SyncsPerMsg are the disk syncs per message: SQLite commits (under synchronous=FULL each
	// fsyncs the WAL), PostgreSQL's WAL flushes (pg_stat_wal.wal_sync); 0 where not counted.
	SyncsPerMsg float64 `json:",omitempty"`
	// Skipped says why this system was not measured (its figures are then 0).
	Skipped string `json:",omitempty"`
}

// SyncRatio is r's disk syncs per second over the disk's fsync rate: near 1 the disk is
// the limit; 0 when either is unknown.
func (r Result) SyncRatio(f Fsync) float64 {
	if f.PerSec <= 0 {
		return 0
	}
	return r.MsgPerSec * r.SyncsPerMsg / f.PerSec
}

// Options choose the workload.
type Options struct {
	// Dir holds the database files and the JetStream store of this run.
	Dir string
	// Messages is the backlog each system drains; default 20,000.
	Messages int
	// Workers is the handler concurrency of wqhost and JetStream; default 16 (the
	// listener's default MaxWorkers).
	Workers int
	// RiverWorkers is River's MaxWorkers; default 2,000 (River's own benchmark).
	RiverWorkers int
	// Timeout bounds one drain; default 5 minutes.
	Timeout time.Duration
	// Systems names the systems Run runs (System.Name); empty means all.
	Systems []string
	// ProbeTime is how long each fsync probe (one before each drain) runs; default 1 s.
	ProbeTime time.Duration
	// Postgres is the cluster River's PostgreSQL drains use; Run starts one (and stops it)
	// when river-postgres is among its systems; nil makes RiverPostgres start its own.
	Postgres *Postgres
	// PostgresBin is the directory of PostgreSQL's initdb and postgres; empty finds them.
	PostgresBin string
	// RequirePostgres makes Run fail when PostgreSQL cannot start, instead of reporting
	// river-postgres as skipped with why (CI sets it: there the row must be measured).
	RequirePostgres bool
}

func (o *Options) defaults() {
	if o.Messages <= 0 {
		o.Messages = 20_000
	}
	if o.Workers <= 0 {
		o.Workers = 16
	}
	if o.RiverWorkers <= 0 {
		o.RiverWorkers = 2000
	}
	if o.ProbeTime <= 0 {
		o.ProbeTime = time.Second
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
	{"river-postgres", RiverPostgres},
	{"river-sqlite", RiverSQLite},
	{"jetstream-sync", func(ctx context.Context, o Options) (Result, error) { return JetStream(ctx, o, true) }},
	{"wqhost-nats-sync", func(ctx context.Context, o Options) (Result, error) { return JetStreamListener(ctx, o, true) }},
	{"jetstream", func(ctx context.Context, o Options) (Result, error) { return JetStream(ctx, o, false) }},
	{"wqhost-nats", func(ctx context.Context, o Options) (Result, error) { return JetStreamListener(ctx, o, false) }},
	{"jetstream-doubleack", func(ctx context.Context, o Options) (Result, error) { return JetStreamDoubleAck(ctx, o, false) }},
}

// Drains is one comparison: each system's best round, and the disk's fsync rate measured
// before each drain (the best probe kept: the highest ceiling).
type Drains struct {
	Rows  []Result
	Fsync Fsync
	// LoadStart and LoadEnd are the load averages (/proc/loadavg's first three fields) when
	// the drains began and ended, empty where unreadable: on a shared machine they say how
	// much else ran meanwhile.
	LoadStart, LoadEnd string `json:",omitempty"`
}

// loadAvg is the 1, 5 and 15 minute load averages, or "" where the system has none.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// Run drains o.Messages on every system, rounds times in alternation (a noisy machine
// slows whichever runs at the time; the best round of each is kept), each drain after an
// fsync probe in o.Dir, and returns one Result per system run, in Systems' order. When
// river-postgres is among them Run starts one PostgreSQL cluster for all rounds; if it
// cannot (no binaries, no postgres user, the server not starting), that row is Skipped with
// why, or Run fails if o.RequirePostgres.
func Run(ctx context.Context, o Options, rounds int, progress func(string)) (Drains, error) {
	o.defaults()
	if progress == nil {
		progress = func(string) {}
	}
	var run []System
	for _, s := range Systems {
		if len(o.Systems) == 0 || slices.Contains(o.Systems, s.Name) {
			run = append(run, s)
		}
	}
	if len(run) == 0 {
		return Drains{}, fmt.Errorf("no system named %v (want some of %s)", o.Systems, strings.Join(systemNames(), ", "))
	}
	skipped := map[string]string{}
	if slices.ContainsFunc(run, func(s System) bool { return s.Name == "river-postgres" }) && o.Postgres == nil {
		pg, err := StartPostgres(ctx, o.PostgresBin)
		switch {
		case err == nil:
			o.Postgres = pg
			defer pg.Stop()
		case o.RequirePostgres:
			return Drains{}, fmt.Errorf("river-postgres: %w", err)
		default:
			skipped["river-postgres"] = err.Error()
			progress("river-postgres: skipped: " + err.Error())
		}
	}
	d := Drains{Rows: make([]Result, len(run)), LoadStart: loadAvg()}
	for r := range max(rounds, 1) {
		for i, s := range run {
			if why, ok := skipped[s.Name]; ok {
				d.Rows[i] = Result{System: s.Name, Skipped: why}
				continue
			}
			f, err := ProbeFsync(filepath.Join(o.Dir, fmt.Sprintf("fsync-%d", r)), o.ProbeTime)
			if err != nil {
				return Drains{}, err
			}
			progress(fmt.Sprintf("fsync probe: %.0f fsyncs/s", f.PerSec))
			probes := append(d.Fsync.Probes, f.PerSec)
			if f.PerSec > d.Fsync.PerSec {
				d.Fsync = f
			}
			d.Fsync.Probes = probes
			o := o
			o.Dir = filepath.Join(o.Dir, fmt.Sprintf("%s-%d", s.Name, r))
			res, err := s.Run(ctx, o)
			if err != nil {
				return Drains{}, fmt.Errorf("drain on %s (round %d): %w", s.Name, r+1, err)
			}
			progress(fmt.Sprintf("%s: %.0f msg/s", s.Name, res.MsgPerSec))
			if res.MsgPerSec > d.Rows[i].MsgPerSec {
				d.Rows[i] = res
			}
		}
	}
	d.LoadEnd = loadAvg()
	return d, nil
}

func systemNames() []string {
	var names []string
	for _, s := range Systems {
		names = append(names, s.Name)
	}
	return names
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

// Find returns the result of the named system (Result.System: "wqhost", "river-postgres",
// "river-sqlite", "jetstream", "wqhost-nats"), for the JetStream ones with sync_always or
// without, or nil.
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

// Lines are the summary lines the Truth issue quotes, the first
//
//	local drain msg/s: wqhost=W river-postgres=P river-sqlite=S fsync/s=F ceiling-ratio=C
//
// where C is wqhost's msg/s over the msg/s the disk allows at wqhost's messages per commit
// (F × messages per sync): its syncs/s ÷ F. A skipped system reads "skipped", one not run
// "-"; the next lines give each SQLite and PostgreSQL store's syncs/s ÷ fsync/s and the
// JetStream figures.
func Lines(d Drains) []string {
	var out []string
	rows := d.Rows
	w, rp, rs := Find(rows, "wqhost", false), Find(rows, "river-postgres", false), Find(rows, "river-sqlite", false)
	if w != nil || rp != nil || rs != nil {
		ceiling := "-"
		if measured(w) {
			ceiling = fmt.Sprintf("%.2f", w.SyncRatio(d.Fsync))
		}
		out = append(out, fmt.Sprintf("local drain msg/s: wqhost=%s river-postgres=%s river-sqlite=%s fsync/s=%.0f ceiling-ratio=%s",
			rate(w), rate(rp), rate(rs), d.Fsync.PerSec, ceiling))
		disk := "local drain disk syncs/s ÷ fsync/s:"
		if measured(w) {
			disk += fmt.Sprintf(" wqhost=%.3f (%.4f syncs/msg)", w.SyncRatio(d.Fsync), w.SyncsPerMsg)
		}
		if measured(rp) {
			disk += fmt.Sprintf(" river-postgres=%.3f (%.4f WAL syncs/msg, %.4f commits/msg)", rp.SyncRatio(d.Fsync), rp.SyncsPerMsg, rp.CommitsPerMsg)
		}
		if measured(rs) {
			disk += fmt.Sprintf(" river-sqlite=%.3f (%.4f syncs/msg)", rs.SyncRatio(d.Fsync), rs.SyncsPerMsg)
		}
		var ratios []string
		for _, r := range []*Result{rp, rs} {
			if measured(w) && measured(r) {
				ratios = append(ratios, fmt.Sprintf("wqhost/%s=%.2f×", r.System, w.MsgPerSec/r.MsgPerSec))
			}
		}
		if len(ratios) > 0 {
			disk += "; " + strings.Join(ratios, " ")
		}
		out = append(out, disk)
	}
	for _, r := range rows {
		if r.Skipped != "" {
			out = append(out, fmt.Sprintf("%s skipped: %s", r.System, r.Skipped))
		}
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

func measured(r *Result) bool { return r != nil && r.Skipped == "" && r.MsgPerSec > 0 }

// rate is r's msg/s for a summary line: "skipped" or "-" when it has none.
func rate(r *Result) string {
	switch {
	case r == nil:
		return "-"
	case r.Skipped != "":
		return "skipped"
	}
	return fmt.Sprintf("%.0f", r.MsgPerSec)
}
