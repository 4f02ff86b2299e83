package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestOversizeAndPoisonCommandsBoundedMemory, with the real binary and local store, 8
// messages of 50 MB each (400 MB):
//   - sent under a 64 MiB max_message_bytes, then served by a host whose tenant allows
//     1 MiB: the host dead-letters each with its size and the limit as the reason without
//     loading it (peak RSS far below one batch of bodies; the old host leased and loaded the
//     whole batch);
//   - `poison list` (table and JSON, and paged by --limit/--after), `requeue` and `purge`
//     over the 8 dead letters each stay under 200 MiB of peak RSS: list and purge read no
//     body, requeue moves each inside the store (the old commands leased 32 with bodies).
//
// Peak RSS is the child's ru_maxrss, which on Linux also counts the parent's peak at the
// fork: the test process itself never holds a body, so the figure can only overstate.
func TestOversizeAndPoisonCommandsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 800 MB")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	writeCfg := func(name, limit string) string {
		p := filepath.Join(dir, name)
		yaml := fmt.Sprintf("data_dir: %s\nadmin: {addr: \"off\"}\ntenants:\n  default:\n    limits: {max_message_bytes: %s}\n    bindings:\n      b: {queue: jobs, module: 'builtin:echo-go'}\n", data, limit)
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big, small := writeCfg("big.yaml", "64MiB"), writeCfg("small.yaml", "1MiB")
	const n, size = 8, 50 << 20
	bodyFile := filepath.Join(dir, "body")
	f, err := os.Create(bodyFile)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{'x'}, 1<<20)
	for range size / len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for range n {
		wq(t, dir, "send", "--config", big, "--queue", "jobs", "--file", bodyFile).expect(t, 0, "send 50 MB")
	}

	// list and purge read no body: under 200 MiB. A move (the host's dead letter, requeue)
	// copies one body at a time inside SQLite (a few transient copies of it): under the 400
	// MB the 8 bodies would take at once, which is what the old code loaded.
	const bound, moveBound = 200 << 20, n * size
	check := func(what string, r result, rss, bound int64, wants ...string) {
		t.Helper()
		t.Logf("%s over %d × %d MB messages: peak RSS %d MiB", what, n, size>>20, rss>>20)
		r.expect(t, 0, what, wants...)
		if rss > bound {
			t.Errorf("%s: peak RSS %d MiB, want < %d MiB", what, rss>>20, bound>>20)
		}
	}
	cfg, err := source.LoadConfig(config.LoadOptions{File: small, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	depth := func(qname string) int64 {
		// The host moving 50 MB bodies holds the store's write lock for long stretches under
		// -race on a loaded machine, past SQLite's 10 s busy timeout: opening is retried.
		var q queue.Queue
		var closer io.Closer
		var err error
		for start := time.Now(); ; {
			q, closer, err = host.OpenQueue(context.Background(), cfg, "default", qname)
			if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Since(start) > 2*time.Minute {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer closer.Close()
		d, err := q.Depth(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	h := startHost(t, dir, "--config", small)
	waitFor(t, 2*time.Minute, "8 dead letters", func() bool { return depth("jobs-poison") == n })
	if code := h.stop(syscall.SIGTERM, time.Minute); code != 0 {
		t.Fatalf("host exit %d", code)
	}
	rss := h.cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	t.Logf("host dead-lettering %d × %d MB messages above max_message_bytes 1MiB: peak RSS %d MiB", n, size>>20, rss>>20)
	if rss > moveBound {
		t.Errorf("host: peak RSS %d MiB, want < %d MiB: oversize messages were loaded", rss>>20, moveBound>>20)
	}
	if d := depth("jobs"); d != 0 {
		t.Errorf("jobs holds %d messages after the host ran, want 0", d)
	}

	reason := fmt.Sprintf("message body of %d bytes exceeds max_message_bytes %d", size, 1<<20)
	r, rss := peakRSS(t, dir, "poison", "list", "--config", small, "--queue", "jobs")
	check("poison list", r, rss, bound, "8 dead letters in jobs-poison", reason)
	r, rss = peakRSS(t, dir, "poison", "list", "--json", "--config", small, "--queue", "jobs")
	check("poison list --json", r, rss, bound, fmt.Sprintf(`"body_bytes":%d`, size))
	if strings.Contains(r.stdout, `"body":`) {
		t.Errorf("poison list --json printed a 50 MB body")
	}
	// Paging: 3 at a time, following the printed cursor, lists each once.
	seen, after := map[string]int{}, ""
	for page := 0; page < 5; page++ {
		args := []string{"poison", "list", "--json", "--config", small, "--queue", "jobs", "--limit", "3"}
		if after != "" {
			args = append(args, "--after", after)
		}
		r := wq(t, dir, args...)
		r.expect(t, 0, "poison list --limit 3")
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var d host.DeadLetter
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatalf("poison list --json line %q: %v", line, err)
			}
			seen[d.ID]++
		}
		_, cur, ok := strings.Cut(r.stderr, "--after ")
		if !ok {
			break
		}
		after = strings.TrimSpace(cur)
	}
	if len(seen) != n {
		t.Errorf("paging with --limit 3 --after listed %d of %d dead letters: %v", len(seen), n, seen)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("paging listed dead letter %s %d times", k, c)
		}
	}

	// Purge half (the test process must not move a body itself: its own peak would count in
	// the children's ru_maxrss), then requeue the rest.
	r, rss = peakRSS(t, dir, "poison", "purge", "--limit", "4", "--config", small, "--queue", "jobs")
	check("poison purge", r, rss, bound, "purged 4 dead letters")
	r, rss = peakRSS(t, dir, "poison", "requeue", "--config", small, "--queue", "jobs")
	check("poison requeue", r, rss, moveBound, "requeued 4 dead letters")
	// Every body moved whole: back in jobs with its size.
	func() {
		st, err := local.Open(context.Background(), filepath.Join(data, "wqhost.db"), local.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		q, err := st.Queue(context.Background(), "jobs")
		if err != nil {
			t.Fatal(err)
		}
		ms, err := q.ReceiveLimited(context.Background(), n, time.Minute, 0)
		if err != nil || len(ms) != n/2 {
			t.Fatalf("jobs after requeue: %d messages, %v; want %d", len(ms), err, n/2)
		}
		for _, m := range ms {
			if m.Oversize != size {
				t.Errorf("requeued message %s: %d bytes, want %d", m.ID, m.Oversize, size)
			}
		}
	}()
	wq(t, dir, "poison", "list", "--config", small, "--queue", "jobs").expect(t, 0, "list after purge and requeue", "no dead letters in jobs-poison")
}

// TestPoisonPurgeFailurePrintsNoCount: a purge or requeue that fails (here: the store cannot
// be opened, --data-dir is a file) prints no "purged 0" first; the error says what failed.
func TestPoisonPurgeFailurePrintsNoCount(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"purge", "requeue"} {
		r := wq(t, dir, "poison", action, "--data-dir", file, "--queue", "jobs")
		if r.code == 0 || strings.Contains(r.stdout, "purged") || strings.Contains(r.stdout, "requeued") || !strings.Contains(r.stderr, "not-a-dir") {
			t.Errorf("poison %s on a broken store: exit %d, stdout %q, stderr %q; want a failure naming the store and no count on stdout", action, r.code, r.stdout, r.stderr)
		}
	}
}
