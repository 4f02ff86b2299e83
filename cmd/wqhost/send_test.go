package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestSendBadQueueNameIsUsageError: a queue name no tenant can own is the caller's mistake
// (exit 2), named in the error, and nothing is opened for it.
func TestSendBadQueueNameIsUsageError(t *testing.T) {
	for _, q := range []string{"Bad_Name", "other.jobs", strings.Repeat("q", 64)} {
		var out, errb strings.Builder
		c := &cli{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		code := c.main(t.Context(), []string{"send", "--data-dir", t.TempDir(), "--queue", q, "body"})
		if code != exitUsage || !strings.Contains(errb.String(), "invalid queue name") {
			t.Errorf("send --queue %.20s…: exit %d, stderr %q; want exit 2 naming the invalid queue name", q, code, errb.String())
		}
	}
}

// TestSendOrderKey: --order stores the ordered-execution group on the message; a group that
// is not an integer is a usage error.
func TestSendOrderKey(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) (int, string) {
		var out, errb strings.Builder
		c := &cli{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		return c.main(t.Context(), append([]string{"send", "--data-dir", dir, "--queue", "stages"}, args...)), errb.String()
	}
	if code, stderr := run("--order", "second", "x"); code != exitUsage || !strings.Contains(stderr, "--order") {
		t.Fatalf("--order second: exit %d, stderr %q; want exit 2 naming --order", code, stderr)
	}
	if code, stderr := run("--order", "7", "x"); code != exitOK {
		t.Fatalf("--order 7: exit %d, stderr %q", code, stderr)
	}
	cfg, err := config.Load(config.LoadOptions{Environ: []string{"WQHOST_DATA_DIR=" + dir}})
	if err != nil {
		t.Fatal(err)
	}
	q, closer, err := host.OpenQueue(t.Context(), cfg, config.DefaultTenant, "stages")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	ms, err := q.Receive(t.Context(), 32, time.Minute)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Receive = %d messages, %v; want the one sent", len(ms), err)
	}
	if got := ms[0].Attributes[queue.AttrOrderKey]; got != "7" {
		t.Fatalf("order key = %q, want 7", got)
	}
}

// TestSendBodies checks what lands on the queue for each way of giving bodies, read back
// from the local store in order.
func TestSendBodies(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		file  string
		want  []string
	}{
		{"body", []string{"hello"}, "", "", []string{"hello"}},
		{"count numbers", []string{"--count", "3", "m-{n}"}, "", "", []string{"m-1", "m-2", "m-3"}},
		{"count repeats", []string{"--count", "2", "same"}, "", "", []string{"same", "same"}},
		{"file whole", []string{"--file", "F"}, "", "a\nb\n", []string{"a\nb\n"}},
		{"file lines", []string{"--file", "F", "--lines"}, "", "a\n\n  b  \nc", []string{"a", "b", "c"}},
		{"stdin", []string{"--file", "-"}, "from stdin", "", []string{"from stdin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"send", "--data-dir", filepath.Join(dir, "data"), "--queue", "q"}
			for _, a := range tc.args {
				if a == "F" {
					a = filepath.Join(dir, "body.txt")
					if err := os.WriteFile(a, []byte(tc.file), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				args = append(args, a)
			}
			cmd := exec.Command(wqhostBin, args...)
			cmd.Dir, cmd.Env, cmd.Stdin = dir, testEnv(), strings.NewReader(tc.stdin)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("send: %v\n%s", err, out)
			}
			var got []string
			for _, m := range drainQueue(t, filepath.Join(dir, "data", "wqhost.db"), "q") {
				got = append(got, string(m.Body))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("queue holds %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSendRefusesOversizeBody: a body above the tenant's limits.max_message_bytes is refused
// by send with exit 2 naming the limit, before anything is sent (the host would reject it).
func TestSendRefusesOversizeBody(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "wqhost.yaml")
	yaml := fmt.Sprintf("data_dir: %s\nadmin: {addr: \"off\"}\ntenants:\n  default:\n    limits: {max_message_bytes: 1KiB}\n    bindings:\n      b: {queue: jobs, module: 'builtin:echo-go'}\n", filepath.Join(dir, "data"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "above tenants.default.limits.max_message_bytes 1KiB"
	wq(t, dir, "send", "--config", cfg, "--queue", "jobs", "--file", big).expect(t, 2, "send of 4 KiB", want)
	wq(t, dir, "send", "--config", cfg, "--queue", "jobs", strings.Repeat("y", 1025)).expect(t, 2, "send of 1025 bytes", want)
	wq(t, dir, "send", "--config", cfg, "--queue", "jobs", "--count", "3", strings.Repeat("y", 1020)+"{n}").expect(t, 0, "send of 1021 bytes", "sent 3 messages")
	wq(t, dir, "send", "--config", cfg, "--queue", "jobs", "--count", "10", strings.Repeat("y", 1023)+"{n}").expect(t, 2, "send whose 10th body is 1025 bytes", want)
}

// TestSendCountStreams: `send --count 2000000000` used to preallocate every body and die
// out of memory; it now streams. The child's RSS is sampled while it sends, then it is
// stopped early.
func TestSendCountStreams(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(wqhostBin, "send", "--data-dir", filepath.Join(dir, "data"), "--queue", "jobs", "--count", "2000000000", "m{n}")
	cmd.Dir, cmd.Env = dir, testEnv()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var peak int64
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if rss := rssOf(cmd.Process.Pid); rss > peak {
			peak = rss
		}
		time.Sleep(50 * time.Millisecond)
	}
	if peak == 0 {
		t.Fatalf("no RSS sampled (process exited? %s)", errb.String())
	}
	t.Logf("send --count 2000000000: peak RSS %d MiB over 3s", peak>>20)
	if peak > 200<<20 {
		t.Errorf("send --count 2000000000: RSS %d MiB, want bounded (< 200 MiB)", peak>>20)
	}
}

// TestSendUnsendableIsUsageError: a body the backend cannot carry (above Azure's 64 KiB after
// encoding, binary under its text encoding), whether the queue said so or the running host's
// API did (400, or 413 for a size), is the caller's input: exit 2 with the reason, not 1.
func TestSendUnsendableIsUsageError(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"queue refused the body", fmt.Errorf("azure: send to jobs: message text of 70000 bytes exceeds Azure's 65536-byte limit: %w", queue.ErrUnsendable), exitUsage},
		{"host answered 400", fmt.Errorf("after 0 of 1 messages: %w", &apiError{method: "POST", url: "/v1/x", code: 400, msg: "not valid"}), exitUsage},
		{"host answered 413", fmt.Errorf("after 0 of 1 messages: %w", &apiError{method: "POST", url: "/v1/x", code: 413, msg: "too large"}), exitUsage},
		{"host answered 500", &apiError{method: "POST", url: "/v1/x", code: 500, msg: "store failed"}, exitFailure},
	} {
		var errb strings.Builder
		c := &cli{stdout: &strings.Builder{}, stderr: &errb, getenv: func(string) string { return "" }}
		if got := c.exitCode("send", tc.err); got != tc.want || !strings.Contains(errb.String(), tc.err.Error()) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d with the error", tc.name, got, errb.String(), tc.want)
		}
	}
}

// TestSendInterruptedSaysHowManyWereSent: a send of many messages interrupted (SIGINT or
// SIGTERM; here c.halt) stops between chunks and says how many of them are in the queue; the
// queue holds exactly that many (it used to die at the signal without a word).
func TestSendInterruptedSaysHowManyWereSent(t *testing.T) {
	dir := t.TempDir()
	halt := make(chan struct{})
	close(halt)
	var out, errb strings.Builder
	c := &cli{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, halt: halt}
	code := c.main(t.Context(), []string{"send", "--data-dir", dir, "--queue", "jobs", "--count", "1000", "m{n}"})
	if code != exitFailure || !strings.Contains(errb.String(), "interrupted after 0 of 1000 messages: those 0 are in jobs") {
		t.Fatalf("interrupted send: exit %d, stderr %q; want exit 1 saying 0 of 1000 were sent", code, errb.String())
	}
	cfg, err := config.Load(config.LoadOptions{Environ: []string{"WQHOST_DATA_DIR=" + dir}})
	if err != nil {
		t.Fatal(err)
	}
	q, closer, err := host.OpenQueue(t.Context(), cfg, config.DefaultTenant, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if n, err := q.Depth(t.Context()); err != nil || n != 0 {
		t.Fatalf("depth %d, %v after a send interrupted before its first chunk; want 0", n, err)
	}
}
