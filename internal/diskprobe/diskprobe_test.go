package diskprobe

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// TestCommitsCountsOneFile: the counter of a file counts that file's commits, one per
// transaction, and not another file's.
func TestCommitsCountsOneFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	ca, cb := Commits(a), Commits(b)
	for _, path := range []string{a, b} {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.ExecContext(context.Background(), "CREATE TABLE t (x)"); err != nil {
			t.Fatal(err)
		}
		n := 3
		if path == b {
			n = 1
		}
		for i := range n {
			if _, err := db.ExecContext(context.Background(), "INSERT INTO t VALUES (?)", i); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := ca.Load(), int64(4); got != want { // CREATE and three inserts
		t.Errorf("a.db: %d commits, want %d", got, want)
	}
	if got, want := cb.Load(), int64(2); got != want {
		t.Errorf("b.db: %d commits, want %d", got, want)
	}
}

// TestProbeFsync: a probe measures at least one burst, reports their median and leaves no
// file behind.
func TestProbeFsync(t *testing.T) {
	dir := t.TempDir()
	p, err := ProbeFsync(dir, 60*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Bursts) < 2 || p.PerSec <= 0 {
		t.Fatalf("probe %+v; want two bursts or more and a rate", p)
	}
	lower := 0
	for _, r := range p.Bursts {
		if r < p.PerSec {
			lower++
		}
	}
	if lower > len(p.Bursts)/2 {
		t.Errorf("%d of %d bursts below the reported rate %.0f: not their median", lower, len(p.Bursts), p.PerSec)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("probe left %v", left)
	}
	if _, err := ProbeFsync(filepath.Join(dir, "missing"), time.Millisecond); err == nil {
		t.Error("probe in a missing directory: no error")
	}
}
