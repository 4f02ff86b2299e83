package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSigtermDuringLoad: a host stuck loading a module (its start function never returns,
// under a 10-minute time limit, so only the signal can end it) exits on SIGTERM within
// seconds, with the exit code of a build that did not finish (2), naming the module.
func TestSigtermDuringLoad(t *testing.T) {
	dir := t.TempDir()
	mod, err := filepath.Abs("../../runtime/testdata/hang/hang.wasm")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "wqhost.yaml")
	yaml := fmt.Sprintf("data_dir: %s\nadmin: {addr: \"off\"}\ntenants:\n  default:\n    limits: {timeout: 10m}\n    bindings:\n      b: {queue: jobs, module: %s}\n", filepath.Join(dir, "data"), mod)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(wqhostBin, "run", "--config", cfg)
	cmd.Dir, cmd.Env = dir, testEnv()
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	// Loading: the process is up and burning CPU in the start function.
	waitFor(t, time.Minute, "the host loading the module", func() bool { return cpuTicks(cmd.Process.Pid) > 50 })
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second): // far above the time it takes: only a hang gets here
		t.Fatalf("host ignored SIGTERM for 30s while loading a module whose start function never returns\n%s", logs.String())
	}
	t.Logf("SIGTERM during load: exited after %s", time.Since(sent).Round(time.Millisecond))
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(logs.String(), "hang.wasm") {
		t.Errorf("exit %d, want 2 naming the module:\n%s", code, logs.String())
	}
}

// TestSigtermDuringDrainEndsWithinGrace: SIGTERM while a handler runs far longer than the
// shutdown grace (30 s; the binding's time limit is 10 minutes) ends the host once the grace
// is over: the call is interrupted, the exit code (1) and the log say a handler was cut off,
// and the message goes back to its queue, not lost.
func TestSigtermDuringDrainEndsWithinGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 30 s shutdown grace")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "wqhost.yaml")
	yaml := fmt.Sprintf("tenants:\n  default:\n    limits: {timeout: 10m}\n    bindings:\n      flaky: {queue: jobs, output: done, module: %s}\n", flakyWasm)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startHost(t, dir, "--config", cfg)
	// 10^12 loop iterations: hours of CPU.
	wq(t, dir, "send", "--config", cfg, "--data-dir", filepath.Join(dir, "data"), "--queue", "jobs", "spin:1000000:x").expect(t, 0, "send")
	waitFor(t, time.Minute, "the handler running", func() bool { return h.binding("default", "flaky").InFlight == 1 })
	sent := time.Now()
	const grace, margin = 30 * time.Second, 30 * time.Second
	if code := h.stop(syscall.SIGTERM, grace+margin); code != 1 || !strings.Contains(h.logs(), "still running after the 30s shutdown grace were cancelled") {
		t.Fatalf("exit %d after SIGTERM, want 1 saying the handler was cancelled after the grace\n%s", code, h.logs())
	}
	took := time.Since(sent)
	t.Logf("SIGTERM with a handler spinning past the grace: exited after %s (grace %s)", took.Round(time.Millisecond), grace)
	left := drainQueue(t, filepath.Join(dir, "data", "wqhost.db"), "jobs")
	if len(left) != 1 || string(left[0].Body) != "spin:1000000:x" {
		t.Errorf("after shutdown jobs holds %d receivable messages, want the interrupted one back", len(left))
	}
}

// cpuTicks returns the user+system CPU ticks of a process from /proc, 0 if it is gone.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start after the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	var u, k int64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &k)
	return u + k
}
