package faulttest

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size (e.g. "2m") at a new directory and returns it; the test
// remounts it to fill it, grow it or make it read-only. Mounting needs root (CAP_SYS_ADMIN):
// elsewhere the test is skipped with the reason.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func remount(t *testing.T, dir, opts string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+opts, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v: %s", dir, opts, err, out)
	}
}

// storeConfig is an echo binding whose local store lives in store (data_dir, with the
// compilation cache, stays on the ordinary disk).
func storeConfig(t *testing.T, dir, store string) string {
	return writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
log: {level: warn}
backends:
  local:
    type: local
    path: %s
tenants:
  default:
    bindings:
      echo:
        queue: jobs
        output: done
        module: builtin:echo-go
        visibility_timeout: 2s
        backoff: {min: 10ms, max: 500ms}
`, filepath.Join(dir, "data"), filepath.Join(store, "wqhost.db")))
}

// integrityCheck runs SQLite's integrity check on the store.
func integrityCheck(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatalf("integrity check of %s: %v", path, err)
	}
	if res != "ok" {
		t.Fatalf("integrity check of %s: %s", path, res)
	}
}

var afterRE = regexp.MustCompile(`after (\d+) of (\d+) messages`)

// TestFaultDiskFull: the local store's filesystem fills up while messages are sent and
// processed. Sends fail with a clear error (and what was acknowledged stays), the host stays
// up without corrupting the store, and when space returns it processes every acknowledged
// message.
func TestFaultDiskFull(t *testing.T) {
	store := mountTmpfs(t, "6m")
	dir := t.TempDir()
	cfgFile := storeConfig(t, dir, store)
	pad := strings.Repeat("p", 700)

	// Fill the store while a host drains it: its outputs need space too.
	p := startReady(t, cfgFile, nil)
	var ids []string
	var full result
	for c := 1; c <= 200; c++ {
		prefix := fmt.Sprintf("c%d-", c)
		r := wq(t, nil, "send", "--config", cfgFile, "--queue", "jobs", "--count", "512", prefix+"{n}-"+pad)
		if r.code == 0 {
			for _, id := range numbered(prefix, 512) {
				ids = append(ids, id+"-"+pad)
			}
			continue
		}
		full = r
		k := 0 // no "after K of N": the store could not even be opened, nothing was sent
		if m := afterRE.FindStringSubmatch(r.stderr); m != nil {
			k, _ = strconv.Atoi(m[1])
		}
		for _, id := range numbered(prefix, k) {
			ids = append(ids, id+"-"+pad)
		}
		break
	}
	if full.code == 0 {
		t.Fatalf("the store never filled up after %d messages", len(ids))
	}
	t.Logf("disk full after %d acknowledged messages: %s", len(ids), strings.TrimSpace(full.stderr))
	if full.code != 1 || !strings.Contains(full.stderr, "full") {
		t.Errorf("send on a full disk: want exit 1 and an error saying the disk is full, got %s", full)
	}

	// The running host meets the full disk: it must stay up, not spin, and stop cleanly.
	cpu0 := cpuTime(t, p.pid())
	time.Sleep(5 * time.Second)
	if !p.running() {
		t.Fatalf("host exited on a full disk: %v\n%s", p.err, tail(p.logs(), 4096))
	}
	cpu := cpuTime(t, p.pid()) - cpu0
	bs := p.mustStatus("default", "echo")
	t.Logf("5s on a full disk: host CPU %s; processed %d, failed %d, receives %d, errors %d, depth %d", cpu, bs.Processed, bs.Failed, bs.QueueCalls.Receives, bs.QueueCalls.Errors, bs.Depth)
	if cpu > 2500*time.Millisecond {
		t.Errorf("host used %s of CPU in 5s on a full disk: a hot loop", cpu)
	}
	code := p.stop(time.Minute)
	t.Logf("SIGTERM on a full disk: exit %d", code)

	// A host started on the full disk either refuses to start with a clear error (when
	// even opening the store needs a write) or runs and backs off without spinning.
	p = start(t, cfgFile, nil)
	select {
	case <-p.done:
		code = p.wait(0)
		t.Logf("run on a full disk: exit %d: %s", code, strings.TrimSpace(tail(p.logs(), 600)))
		if code == 0 || !strings.Contains(p.logs(), "full") {
			t.Errorf("run on a full disk: want a non-zero exit saying the disk is full, got %d", code)
		}
	case <-time.After(5 * time.Second):
		cpu0 := cpuTime(t, p.pid())
		time.Sleep(3 * time.Second)
		cpu := cpuTime(t, p.pid()) - cpu0
		t.Logf("run on a full disk: the host runs; CPU %s in 3s", cpu)
		if !p.running() || cpu > 1500*time.Millisecond {
			t.Errorf("host started on a full disk: running %v, CPU %s in 3s", p.running(), cpu)
		}
	}

	// Space returns: everything acknowledged gets processed.
	remount(t, store, "size=256m")
	if !p.running() {
		p = startReady(t, cfgFile, nil)
	}
	p.waitDrained("default", "echo", 3*time.Minute)
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	integrityCheck(t, filepath.Join(store, "wqhost.db"))
	cfg := loadConfig(t, cfgFile, nil)
	outs := bodies(readAll(t, cfg, "default", "done"))
	dead := deadLetters(t, cfgFile, nil, "default", "jobs")
	for _, d := range dead {
		if d.Reason == "" {
			t.Errorf("dead letter %s has no reason", d.ID)
		}
		outs = append(outs, d.Body) // dead-lettered with a reason is not lost
	}
	c, missing := countIDs(ids, outs)
	c.injected = 1
	report(t, "disk-full", c)
	t.Logf("%d dead-lettered while the disk was full", len(dead))
	if c.lost != 0 {
		t.Errorf("%d acknowledged messages lost (e.g. %.40q)", c.lost, missing)
	}
	if c.duplicated > crashBatch*16 {
		t.Errorf("%d duplicates", c.duplicated)
	}
}

// TestFaultReadOnlyDataDir: the local store's filesystem turns read-only. `wqhost send` and
// `wqhost run` fail at once with an error naming the store (the host does not start half
// working), nothing already stored is damaged, and once the filesystem is writable again the
// host processes every message.
func TestFaultReadOnlyDataDir(t *testing.T) {
	store := mountTmpfs(t, "64m")
	dir := t.TempDir()
	cfgFile := storeConfig(t, dir, store)
	const n = 300
	ids := numbered("r-", n)
	mustWQ(t, nil, "send", "--config", cfgFile, "--queue", "jobs", "--count", strconv.Itoa(n), "r-{n}")

	remount(t, store, "ro")
	db := filepath.Join(store, "wqhost.db")
	r := wq(t, nil, "send", "--config", cfgFile, "--queue", "jobs", "one more")
	t.Logf("send on a read-only store: %s", strings.TrimSpace(r.stderr))
	if r.code == 0 || !strings.Contains(r.stderr, db) || !strings.Contains(strings.ToLower(r.stderr), "read") {
		t.Errorf("send on a read-only store: want a failure naming %s as read-only, got %s", db, r)
	}
	p := start(t, cfgFile, nil)
	code := p.wait(time.Minute)
	t.Logf("run on a read-only store: exit %d: %s", code, strings.TrimSpace(tail(p.logs(), 600)))
	if code == 0 || !strings.Contains(p.logs(), db) {
		t.Errorf("run on a read-only store: want a non-zero exit naming %s, got exit %d", db, code)
	}

	remount(t, store, "rw")
	integrityCheck(t, db)
	p = startReady(t, cfgFile, nil)
	p.waitDrained("default", "echo", 2*time.Minute)
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	c, missing := countIDs(ids, bodies(readAll(t, loadConfig(t, cfgFile, nil), "default", "done")))
	c.injected = 1
	report(t, "read-only-store", c)
	if c.lost != 0 || c.duplicated != 0 {
		t.Errorf("lost %d (e.g. %v), duplicated %d", c.lost, missing, c.duplicated)
	}
}
