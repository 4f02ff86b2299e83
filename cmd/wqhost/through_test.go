package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
)

// TestCLIThroughRunningHost: with a host running on the data directory (host.json), send,
// peek, poison list and poison purge go through its admin API while it drains a backlog
// (no second writer on the store, so no SQLITE_BUSY), and the dead-letter depth status
// shows right after the purge is the fresh one. Once the host stopped, host.json is gone
// and send opens the store itself again.
func TestCLIThroughRunningHost(t *testing.T) {
	dir := t.TempDir()
	cfg := flakyConfig(t, dir)
	data := filepath.Join(dir, "data")
	h := startHost(t, dir, "--config", cfg)
	hf, err := readHostFile(data)
	if err != nil || hf.PID != h.cmd.Process.Pid || hf.Admin != "http://"+h.addr {
		t.Fatalf("host.json = %+v, %v; want pid %d, admin http://%s", hf, err, h.cmd.Process.Pid, h.addr)
	}
	cli := func(args ...string) result {
		return wq(t, dir, append(args, "--config", cfg, "--data-dir", data)...)
	}
	// A backlog keeps the host's store writer busy while the commands below run.
	cli("send", "--queue", "jobs", "--count", "5000", "ok:{n}").expect(t, 0, "send backlog", "through the running host")
	cli("send", "--queue", "jobs", "--count", "5", "reject:bad {n}").expect(t, 0, "send rejects", "sent 5 messages", "through the running host")
	// Bodies at the limit go through the API whatever their bytes: control characters (6
	// bytes each as JSON text) go as base64, and a batch never passes the request limit.
	ctrl, big := filepath.Join(dir, "ctrl.bin"), filepath.Join(dir, "big.txt")
	if err := os.WriteFile(ctrl, bytes.Repeat([]byte{1}, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 900<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	cli("send", "--queue", "other", "--file", ctrl).expect(t, 0, "send 1 MiB of control characters", "through the running host")
	cli("send", "--queue", "other", "--count", "3", "--file", big).expect(t, 0, "send 3 × 900 KiB", "sent 3 messages", "through the running host")
	waitFor(t, 2*time.Minute, "5 dead letters", func() bool { return h.binding("default", "flaky").Poisoned == 5 })
	cli("poison", "list", "--queue", "jobs").expect(t, 0, "poison list", "5 dead letters in jobs-poison", "bad 5")
	cli("peek", "--queue", "jobs-poison", "--limit", "2", "--json").expect(t, 0, "peek", `"size":`, `"truncated":false`)
	waitFor(t, 10*time.Second, "the dead-letter depth read", func() bool { return h.binding("default", "flaky").DeadLetterDepth == 5 })

	cli("poison", "purge", "--queue", "jobs").expect(t, 0, "poison purge", "purged 5 dead letters from jobs-poison")
	// The host's log reaches the test through a pipe: wait for the line, bounded.
	waitFor(t, 10*time.Second, "the purge's audit line in the host's log (the purge going through its admin API)", func() bool {
		return strings.Contains(h.logs(), `msg="admin action" actor=host action=purge-dead-letters target=default/jobs count=5`)
	})
	st := cli("status", "--json")
	st.expect(t, 0, "status")
	var s host.Status
	if err := json.Unmarshal([]byte(st.stdout), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	if d := s.Tenants[0].Bindings[0].DeadLetterDepth; d != 0 {
		t.Errorf("status right after the purge shows dead-letter depth %d, want 0 (fresh)", d)
	}

	if code := h.stop(os.Interrupt, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if _, err := os.Stat(filepath.Join(data, hostFileName)); !os.IsNotExist(err) {
		t.Errorf("host.json after the host stopped: %v", err)
	}
	r := cli("send", "--queue", "jobs", "after")
	r.expect(t, 0, "send without a host", "sent message")
	if strings.Contains(r.stdout, "through the running host") {
		t.Errorf("send went through a host that stopped: %s", r.stdout)
	}
}
