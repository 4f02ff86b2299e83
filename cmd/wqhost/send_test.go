package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener"
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
	if got := ms[0].Attributes[listener.AttrOrderKey]; got != "7" {
		t.Fatalf("order key = %q, want 7", got)
	}
}
