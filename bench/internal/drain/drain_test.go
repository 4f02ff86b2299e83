package drain

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/diskprobe"
)

// testPostgres starts a cluster for the test, or skips it naming why PostgreSQL cannot run
// here, except in CI (CI=true), where River on PostgreSQL must be measured.
func testPostgres(t *testing.T) *Postgres {
	t.Helper()
	pg, err := StartPostgres(context.Background(), "")
	if err != nil {
		if os.Getenv("CI") != "true" {
			t.Skipf("River on PostgreSQL not run: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	return pg
}

// TestEachSystemDrainsAll checks every system does the same job: the whole backlog handled
// and gone from the store (each Run checks its store is empty), with its round trips
// counted, and, for the SQLite and PostgreSQL stores, their commits and disk syncs.
func TestEachSystemDrainsAll(t *testing.T) {
	for _, s := range Systems {
		t.Run(s.Name, func(t *testing.T) {
			o := Options{Dir: t.TempDir(), Messages: 300, Workers: 4, RiverWorkers: 100, Timeout: time.Minute}
			if s.Name == "river-postgres" {
				o.Postgres = testPostgres(t)
			}
			res, err := s.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Messages != 300 || res.MsgPerSec <= 0 || res.CallsPerMsg <= 0 || res.Durability == "" {
				t.Errorf("result %+v: want 300 messages, a rate, round trips and a durability setting", res)
			}
			if s.Name == "wqhost" || strings.HasPrefix(s.Name, "river-") {
				if res.CommitsPerMsg <= 0 || res.CommitsPerMsg > 10 || res.SyncsPerMsg <= 0 || res.SyncsPerMsg > 10 {
					t.Errorf("%s: %.4f commits and %.4f disk syncs per message, want counts above 0", s.Name, res.CommitsPerMsg, res.SyncsPerMsg)
				}
			}
		})
	}
}

// TestRunSkipsPostgresItCannotStart: without PostgreSQL's programs the River on PostgreSQL
// row says why it was skipped and the other systems still run; with RequirePostgres (CI)
// the run fails instead.
func TestRunSkipsPostgresItCannotStart(t *testing.T) {
	o := Options{Dir: t.TempDir(), Messages: 50, Workers: 2, Timeout: time.Minute, ProbeTime: 10 * time.Millisecond,
		Systems: []string{"wqhost", "river-postgres"}, PostgresBin: t.TempDir()}
	d, err := Run(context.Background(), o, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	pg := Find(d.Rows, "river-postgres", false)
	if pg == nil || !strings.Contains(pg.Skipped, "no initdb in") {
		t.Fatalf("river-postgres row %+v: want it skipped, naming the missing initdb", pg)
	}
	if w := Find(d.Rows, "wqhost", false); w == nil || w.MsgPerSec <= 0 {
		t.Errorf("wqhost row %+v: want it measured beside the skipped one", w)
	}
	if d.Fsync.PerSec <= 0 {
		t.Errorf("fsync rate %v: want the probe's", d.Fsync.PerSec)
	}
	lines := strings.Join(Lines(d), "\n")
	for _, want := range []string{"river-postgres=skipped river-sqlite=- fsync/s=", "river-postgres skipped: PostgreSQL unavailable: no initdb in"} {
		if !strings.Contains(lines, want) {
			t.Errorf("summary lacks %q:\n%s", want, lines)
		}
	}
	o.RequirePostgres = true
	if _, err := Run(context.Background(), o, 1, nil); !errors.Is(err, ErrNoPostgres) {
		t.Errorf("with RequirePostgres: error %v, want ErrNoPostgres", err)
	}
}

// TestLinesSummary: the summary line the Truth issue checks, with the ceiling ratio as
// wqhost's msg/s over what the disk allows at its messages per disk sync.
func TestLinesSummary(t *testing.T) {
	d := Drains{Fsync: Fsync{PerSec: 760}, Rows: []Result{
		{System: "wqhost", MsgPerSec: 30000, SyncsPerMsg: 0.0076, Durability: "SQLite"},
		{System: "river-postgres", MsgPerSec: 6000, SyncsPerMsg: 0.05, CommitsPerMsg: 0.2, Durability: "PostgreSQL"},
		{System: "river-sqlite", MsgPerSec: 500, SyncsPerMsg: 0.0034, Durability: "SQLite"},
	}}
	lines := Lines(d)
	// 30000 msg/s at 0.0076 syncs/msg is 228 syncs/s: 0.30 of 760; the disk would allow
	// 760 / 0.0076 = 100,000 msg/s.
	if want := "local drain msg/s: wqhost=30000 river-postgres=6000 river-sqlite=500 fsync/s=760 ceiling-ratio=0.30"; len(lines) == 0 || lines[0] != want {
		t.Fatalf("first line %q, want %q", lines, want)
	}
	if want := "local drain disk syncs/s ÷ fsync/s: wqhost=0.300 (0.0076 syncs/msg) river-postgres=0.395 (0.0500 WAL syncs/msg, 0.2000 commits/msg) river-sqlite=0.002 (0.0034 syncs/msg); wqhost/river-postgres=5.00× wqhost/river-sqlite=60.00×"; lines[1] != want {
		t.Errorf("second line\n%q, want\n%q", lines[1], want)
	}
}

// TestProbeFsync: the probe measures a rate and leaves nothing behind.
func TestProbeFsync(t *testing.T) {
	dir := t.TempDir()
	f, err := ProbeFsync(dir, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if f.PerSec <= 0 || f.WriteBytes != diskprobe.WriteBytes || f.Dir != dir {
		t.Errorf("probe %+v: want a rate of %d-byte writes in %s", f, diskprobe.WriteBytes, dir)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("probe left %v in its directory", left)
	}
}

// TestLinesWithoutWqhost: River alone (drain --systems river-postgres,river-sqlite) still
// gets its summary line, wqhost's figures and the ceiling ratio reading "-".
func TestLinesWithoutWqhost(t *testing.T) {
	d := Drains{Fsync: Fsync{PerSec: 800}, Rows: []Result{
		{System: "river-postgres", MsgPerSec: 6000, SyncsPerMsg: 0.004, Durability: "PostgreSQL"},
		{System: "river-sqlite", MsgPerSec: 500, SyncsPerMsg: 0.004, Durability: "SQLite"},
	}}
	lines := Lines(d)
	if want := "local drain msg/s: wqhost=- river-postgres=6000 river-sqlite=500 fsync/s=800 ceiling-ratio=-"; len(lines) == 0 || lines[0] != want {
		t.Fatalf("lines %q, want first %q", lines, want)
	}
	if want := "local drain disk syncs/s ÷ fsync/s: river-postgres=0.030 (0.0040 WAL syncs/msg, 0.0000 commits/msg) river-sqlite=0.003 (0.0040 syncs/msg)"; lines[1] != want {
		t.Errorf("second line %q, want %q", lines[1], want)
	}
}
