package external

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/clock/clocktest"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// Plugin binaries built once for the package by TestMain.
var bins struct {
	latencyScaler, patternPoison, slow string
}

func TestMain(m *testing.M) {
	if path := os.Getenv(hostModeEnv); path != "" {
		runAsHost(path)
		return
	}
	dir, err := os.MkdirTemp("", "wqhost-plugins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := func(pkg, name string) string {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", out, pkg)
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, b)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		return out
	}
	bins.latencyScaler = build("../../examples/policies/latency-scaler", "latency-scaler")
	bins.patternPoison = build("../../examples/policies/pattern-poison", "pattern-poison")
	bins.slow = build("./testdata/slowplugin", "slowplugin")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixed policies stand in for the built-ins, with answers no plugin here gives.
type fixedScaler int

func (f fixedScaler) Desired(context.Context, listener.State) int { return int(f) }

type fixedBackoff time.Duration

func (f fixedBackoff) Next(context.Context, listener.IdleState) (time.Duration, bool) {
	return time.Duration(f), true
}

type fixedPoison struct{}

func (fixedPoison) Decide(context.Context, listener.Failure) outcome.Outcome {
	return outcome.Outcome{Kind: outcome.KindRetry, After: 42 * time.Second, Err: errors.New("fallback")}
}

const fallbackWorkers = 42

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, cfg Config) *Plugin {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	if cfg.CallTimeout == 0 {
		// Generous: the race detector on a shared 2-core machine makes loopback gRPC slow.
		cfg.CallTimeout = 2 * time.Second
	}
	p, err := Start(context.Background(), cfg, fixedScaler(fallbackWorkers), fixedBackoff(time.Minute), fixedPoison{})
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.Path, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie still answers signal 0; /proc says whether it is only waiting to be reaped.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDecisionsReachCaller(t *testing.T) {
	ctx := context.Background()
	scaler := start(t, Config{Path: bins.latencyScaler, Args: []string{"-target", "100ms"}})
	poison := start(t, Config{Path: bins.patternPoison, Env: []string{"POISON_PATTERN=schema", "POISON_RETRY_DELAY=7s"}})

	st := scaler.Status()
	if st.Phase != PhaseRunning || st.Name != "latency-scaler" || !st.Scaler || st.Backoff || st.Poison || st.Pid == 0 {
		t.Fatalf("latency-scaler status = %+v", st)
	}
	scalerTests := []struct {
		name string
		s    listener.State
		want int
	}{
		{"grows under target", listener.State{Depth: 100, ActiveWorkers: 4, MaxWorkers: 32, LatencyP99: 50 * time.Millisecond}, 6},
		{"halves when twice too slow", listener.State{Depth: 100, ActiveWorkers: 8, MaxWorkers: 32, LatencyP99: 200 * time.Millisecond}, 4},
		{"empty goes to min", listener.State{MinWorkers: 1, ActiveWorkers: 8, MaxWorkers: 32}, 1},
	}
	for _, tt := range scalerTests {
		t.Run("scaler/"+tt.name, func(t *testing.T) {
			if got := scaler.Scaler().Desired(ctx, tt.s); got != tt.want {
				t.Errorf("Desired = %d, want %d (status %+v)", got, tt.want, scaler.Status())
			}
		})
	}
	// The plugin declares no back-off: the caller gets the fallback itself.
	if d, stop := scaler.Backoff().Next(ctx, listener.IdleState{Idle: 1}); d != time.Minute || !stop {
		t.Errorf("Backoff of a scaler-only plugin = %v,%v, want the fallback's 1m,true", d, stop)
	}

	msg := &queue.Message{ID: "m-1", Queue: "orders", DequeueCount: 1}
	poisonTests := []struct {
		name      string
		err       string
		want      outcome.Kind
		wantDelay time.Duration
	}{
		{"matching error dead-letters", "bad schema", outcome.KindReject, 0},
		{"other error retries after the configured delay", "timeout", outcome.KindRetry, 7 * time.Second},
	}
	for _, tt := range poisonTests {
		t.Run("poison/"+tt.name, func(t *testing.T) {
			d := poison.Poison().Decide(ctx, listener.Failure{Message: msg, Outcome: outcome.Failed(errors.New(tt.err)), MaxDequeueCount: 5})
			if d.Kind != tt.want || d.After != tt.wantDelay {
				t.Errorf("Decide(%q) = %+v, want %v after %v", tt.err, d, tt.want, tt.wantDelay)
			}
		})
	}
	// The back-off call above went straight to the fallback, past the plugin's counters.
	if st := scaler.Status(); st.Fallbacks != 0 || st.Calls != 3 {
		t.Errorf("scaler counters = calls %d fallbacks %d, want 3 and 0", st.Calls, st.Fallbacks)
	}
}

func TestCrashFallsBackAndRestarts(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Unix(1_700_000_000, 0))
	p := start(t, Config{Path: bins.slow, Clock: clock, RestartMin: time.Second, RestartMax: 4 * time.Second})
	s := listener.State{Queue: "q", MaxWorkers: 100}
	if got := p.Scaler().Desired(ctx, s); got != 3 {
		t.Fatalf("Desired before kill = %d, want the plugin's 3", got)
	}
	oldPid := p.Status().Pid
	if err := syscall.Kill(oldPid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %d: %v", oldPid, err)
	}
	// Calls keep answering while the death is noticed; from then on the fallback answers.
	waitFor(t, "the plugin to be marked down", func() bool {
		got := p.Scaler().Desired(ctx, s)
		if got != 3 && got != fallbackWorkers {
			t.Fatalf("Desired after kill = %d", got)
		}
		return p.Status().Phase == PhaseRestarting
	})
	for range 3 {
		if got := p.Scaler().Desired(ctx, s); got != fallbackWorkers {
			t.Fatalf("Desired while down = %d, want fallback %d", got, fallbackWorkers)
		}
	}
	if p.Status().Restarts != 0 {
		t.Fatalf("restarted before the back-off elapsed on the clock")
	}
	waitFor(t, "the restart", func() bool {
		clock.Advance(time.Second)
		return p.Status().Phase == PhaseRunning
	})
	st := p.Status()
	if st.Restarts != 1 || st.Pid == oldPid || st.Pid == 0 || st.LastError == "" {
		t.Fatalf("status after restart = %+v (old pid %d)", st, oldPid)
	}
	if got := p.Scaler().Desired(ctx, s); got != 3 {
		t.Fatalf("Desired after restart = %d, want the plugin's 3", got)
	}
	if alive(oldPid) {
		t.Errorf("killed plugin %d still alive", oldPid)
	}
}

func TestSlowAnswerFallsBackWithoutStall(t *testing.T) {
	ctx := context.Background()
	p := start(t, Config{Path: bins.slow, CallTimeout: 200 * time.Millisecond})
	begin := time.Now()
	got := p.Scaler().Desired(ctx, listener.State{Queue: "slow", MaxWorkers: 100})
	if elapsed := time.Since(begin); elapsed > 2*time.Second {
		t.Errorf("slow call took %v; the plugin sleeps 5s and the deadline is 200ms", elapsed)
	}
	if got != fallbackWorkers {
		t.Errorf("Desired(slow) = %d, want fallback %d", got, fallbackWorkers)
	}
	// The slow call is still running in the plugin; the next one must not wait for it.
	if got := p.Scaler().Desired(ctx, listener.State{Queue: "q", MaxWorkers: 100}); got != 3 {
		t.Errorf("Desired after a timeout = %d, want the plugin's 3", got)
	}
	st := p.Status()
	if st.Timeouts != 1 || st.Fallbacks != 1 || st.Phase != PhaseRunning {
		t.Errorf("status = %+v, want 1 timeout, 1 fallback, running", st)
	}
}

func TestHungPluginRestarted(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Unix(1_700_000_000, 0))
	p := start(t, Config{Path: bins.slow, CallTimeout: 100 * time.Millisecond, MaxTimeouts: 2, Clock: clock})
	slow := listener.State{Queue: "slow", MaxWorkers: 100}
	fast := listener.State{Queue: "q", MaxWorkers: 100}
	pid := p.Status().Pid
	// A success between timeouts resets the count.
	for _, s := range []listener.State{slow, fast, slow} {
		p.Scaler().Desired(ctx, s)
	}
	if st := p.Status(); st.Phase != PhaseRunning || st.Timeouts != 2 {
		t.Fatalf("after non-consecutive timeouts: %+v", st)
	}
	if got := p.Scaler().Desired(ctx, slow); got != fallbackWorkers {
		t.Fatalf("Desired(slow) = %d, want fallback", got)
	}
	if st := p.Status(); st.Phase != PhaseRestarting || !strings.Contains(st.LastError, "consecutive timeouts") {
		t.Fatalf("after 2 consecutive timeouts: %+v", st)
	}
	waitFor(t, "the hung plugin to be replaced", func() bool {
		clock.Advance(time.Second)
		return p.Status().Phase == PhaseRunning
	})
	if st := p.Status(); st.Pid == pid || st.Restarts != 1 {
		t.Errorf("after restart: %+v (hung pid %d)", st, pid)
	}
	waitFor(t, "the hung process to be killed", func() bool { return !alive(pid) })
}

func TestAbsurdAnswersClamped(t *testing.T) {
	ctx := context.Background()
	p := start(t, Config{Path: bins.slow, Limits: Limits{
		MinWorkers: 2, MaxWorkers: 10, MinDelay: 10 * time.Millisecond, MaxDelay: 30 * time.Second, MaxRetryDelay: time.Hour,
	}})
	workers := []struct {
		queue string
		want  int
	}{{"absurd", 10}, {"negative", 2}, {"q", 3}}
	for _, tt := range workers {
		t.Run("scaler/"+tt.queue, func(t *testing.T) {
			if got := p.Scaler().Desired(ctx, listener.State{Queue: tt.queue, MaxWorkers: 1000}); got != tt.want {
				t.Errorf("Desired = %d, want %d", got, tt.want)
			}
		})
	}
	delays := []struct {
		idle int
		want time.Duration
	}{{1000, 30 * time.Second}, {-1, 10 * time.Millisecond}, {1, 10 * time.Millisecond}, {20, 20 * time.Millisecond}}
	for _, tt := range delays {
		t.Run(fmt.Sprintf("backoff/idle=%d", tt.idle), func(t *testing.T) {
			if got, stop := p.Backoff().Next(ctx, listener.IdleState{Idle: tt.idle}); got != tt.want || stop {
				t.Errorf("Next = %v,%v, want %v,false", got, stop, tt.want)
			}
		})
	}
	decisions := []struct {
		err  string
		want outcome.Outcome
	}{
		{"long", outcome.Outcome{Kind: outcome.KindRetry, After: time.Hour}},
		{"absurd", outcome.Outcome{Kind: outcome.KindRetry, After: 42 * time.Second, Err: errors.New("fallback")}},
		{"other", outcome.Outcome{Kind: outcome.KindDrop, Err: errors.New("slowplugin")}},
	}
	for _, tt := range decisions {
		t.Run("poison/"+tt.err, func(t *testing.T) {
			if got := p.Poison().Decide(ctx, listener.Failure{Outcome: outcome.Failed(errors.New(tt.err))}); !sameOutcome(got, tt.want) {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
	if st := p.Status(); st.Clamped != 7 {
		t.Errorf("Clamped = %d, want 7 (every answer above but q's 3, idle 20's 20ms and the drop)", st.Clamped)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "not-a-plugin")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, reason string
	}{
		{"missing", filepath.Join(dir, "missing"), "no such file"},
		{"directory", dir, "directory"},
		{"not executable", noexec, "not executable"},
		{"not a plugin", script, "not a wqhost policy plugin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Start(context.Background(), Config{Path: tt.path, Logger: quietLogger(), StartTimeout: 5 * time.Second})
			if err == nil {
				p.Close()
				t.Fatalf("Start(%s) succeeded", tt.path)
			}
			if !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("Start error %q should name %s and %q", err, tt.path, tt.reason)
			}
		})
	}
	if _, err := Start(context.Background(), Config{Path: bins.slow}, "not a policy"); err == nil {
		t.Error("Start accepted a fallback that implements no policy")
	}
}

func TestCloseLeavesNoProcess(t *testing.T) {
	p := start(t, Config{Path: bins.slow})
	pid := p.Status().Pid
	if !alive(pid) {
		t.Fatalf("plugin pid %d not alive after Start", pid)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("plugin pid %d alive after Close", pid)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
		t.Errorf("/proc/%d still exists after Close (zombie not reaped?)", pid)
	}
	if got := p.Scaler().Desired(context.Background(), listener.State{}); got != fallbackWorkers {
		t.Errorf("Desired after Close = %d, want fallback", got)
	}
}

func TestReloadAndFailed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "plugin")
	copyFile(t, bins.slow, bin)
	clock := clocktest.New(time.Unix(1_700_000_000, 0))
	p := start(t, Config{Path: bin, Clock: clock, MaxRestarts: 2, RestartMin: time.Second})
	first := p.Status().Pid

	// Reload swaps in a new process and kills the old one.
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	second := p.Status().Pid
	if second == first || p.Status().Reloads != 1 {
		t.Fatalf("after Reload: status %+v, first pid %d", p.Status(), first)
	}
	waitFor(t, "the old process to exit", func() bool { return !alive(first) })

	// A binary gone from disk cannot restart: after MaxRestarts attempts the plugin fails.
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(ctx); err == nil || !strings.Contains(err.Error(), bin) {
		t.Fatalf("Reload of a removed binary = %v, want an error naming it", err)
	}
	if p.Status().Pid != second {
		t.Fatalf("a failed Reload replaced the running plugin")
	}
	syscall.Kill(second, syscall.SIGKILL)
	waitFor(t, "the plugin to fail", func() bool {
		p.Scaler().Desired(ctx, listener.State{})
		clock.Advance(time.Second)
		return p.Status().Phase == PhaseFailed
	})
	if got := p.Scaler().Desired(ctx, listener.State{}); got != fallbackWorkers {
		t.Errorf("Desired while failed = %d, want fallback", got)
	}
	// Reload revives it once the binary is back.
	copyFile(t, bins.slow, bin)
	if err := p.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Status(); st.Phase != PhaseRunning {
		t.Fatalf("after reviving Reload: %+v", st)
	}
	if got := p.Scaler().Desired(ctx, listener.State{MaxWorkers: 10}); got != 3 {
		t.Errorf("Desired after revive = %d, want 3", got)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestRestartDelay(t *testing.T) {
	tests := []struct {
		n    int
		want time.Duration
	}{{0, 100 * time.Millisecond}, {1, 200 * time.Millisecond}, {3, 800 * time.Millisecond}, {10, time.Second}, {1000, time.Second}}
	for _, tt := range tests {
		if got := restartDelay(tt.n, 100*time.Millisecond, time.Second); got != tt.want {
			t.Errorf("restartDelay(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// BenchmarkPolicy compares one scaling decision made in process with the same decision made
// by a plugin over gRPC.
func BenchmarkPolicy(b *testing.B) {
	ctx := context.Background()
	s := listener.State{Queue: "q", Depth: 100, ActiveWorkers: 4, MaxWorkers: 32, LatencyP99: 50 * time.Millisecond}
	b.Run("builtin", func(b *testing.B) {
		var sc listener.Scaler = fixedScaler(3)
		for b.Loop() {
			sc.Desired(ctx, s)
		}
	})
	b.Run("plugin", func(b *testing.B) {
		p, err := Start(ctx, Config{Path: bins.slow, Logger: quietLogger(), CallTimeout: time.Second}, fixedScaler(fallbackWorkers))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		sc := p.Scaler()
		for b.Loop() {
			sc.Desired(ctx, s)
		}
		if st := p.Status(); st.Fallbacks > 0 {
			b.Errorf("%d of %d calls fell back", st.Fallbacks, st.Calls)
		}
	})
}

// syncBuffer is an io.Writer safe for the plugin's stderr goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPluginStderrReachesLog(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	_, err := Start(context.Background(), Config{Path: bins.patternPoison, Args: []string{"-pattern", "("}, Logger: logger})
	if err == nil || !strings.Contains(err.Error(), bins.patternPoison) {
		t.Fatalf("Start with a bad pattern = %v, want an error naming the binary", err)
	}
	// go-plugin reads stderr concurrently with the exit; give the reader a moment.
	waitFor(t, "the plugin's stderr in the log", func() bool {
		return strings.Contains(buf.String(), `pattern-poison: -pattern`)
	})
	if !strings.Contains(buf.String(), "plugin="+bins.patternPoison) {
		t.Errorf("log lines lack the plugin attribute:\n%s", buf.String())
	}
}

// hostModeEnv makes the test binary act as a host that starts the plugin at its value,
// prints the plugin's pid and waits to be killed.
const hostModeEnv = "WQHOST_TEST_HOST_PLUGIN"

func runAsHost(path string) {
	p, err := Start(context.Background(), Config{Path: path, Logger: quietLogger()})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(p.Status().Pid)
	select {}
}

// TestPluginDiesWithKilledHost kills a host with SIGKILL (no Close, no cleanup) and expects
// its plugin to die too.
func TestPluginDiesWithKilledHost(t *testing.T) {
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), hostModeEnv+"="+bins.slow)
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer host.Wait()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		host.Process.Kill()
		t.Fatalf("reading the plugin pid from the host: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || !alive(pid) {
		host.Process.Kill()
		t.Fatalf("host printed %q; plugin not running", line)
	}
	if err := host.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("plugin %d to die with its host", pid), func() bool { return !alive(pid) })
}

// sameOutcome reports whether a and b ask for the same thing with the same reason: errors
// are compared by text, since a plugin's answer crossed a process boundary.
func sameOutcome(a, b outcome.Outcome) bool {
	return a.Kind == b.Kind && a.After == b.After && a.Reason() == b.Reason()
}
