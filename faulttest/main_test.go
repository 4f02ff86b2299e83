package faulttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/listener/queue"
)

// Set by TestMain: the real binary, built once, and the repository root (fixtures).
var (
	wqhostBin string
	repoRoot  string
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "wqhost-faulttest-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if repoRoot, err = filepath.Abs(".."); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		wqhostBin = filepath.Join(dir, "wqhost")
		cmd := exec.Command("go", "build", "-o", wqhostBin, "./cmd/wqhost")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build ./cmd/wqhost: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}())
}

// fixture returns the absolute path of a committed file of the repository.
func fixture(rel string) string { return filepath.Join(repoRoot, filepath.FromSlash(rel)) }

// tally is one fault's outcome in message counts.
type tally struct {
	sent, processed, lost, duplicated int
	injected                          int // how many times the fault was injected
}

// report prints the fault's line (the suite's contract with CI logs) and returns it.
func report(t *testing.T, name string, c tally) {
	t.Helper()
	line := fmt.Sprintf("fault %s: sent=%d processed=%d lost=%d duplicated=%d", name, c.sent, c.processed, c.lost, c.duplicated)
	fmt.Println(line)
	t.Log(line)
	t.Logf("fault %s injected %d times", name, c.injected)
}

// countIDs compares the ids sent with the bodies seen on the output queue.
func countIDs(sent []string, outputs [][]byte) (c tally, missing []string) {
	seen := map[string]int{}
	for _, o := range outputs {
		seen[string(o)]++
	}
	c.sent = len(sent)
	for _, id := range sent {
		n := seen[id]
		if n == 0 {
			c.lost++
			if len(missing) < 10 {
				missing = append(missing, id)
			}
			continue
		}
		c.processed++
		c.duplicated += n - 1
	}
	return c, missing
}

// numbered returns the ids `wqhost send --count n prefix{n}` sends.
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i+1)
	}
	return out
}

// testEnv is the environment of every child: the test's, without WQHOST_ overrides from a
// developer's shell, plus extra.
func testEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WQHOST_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// result is a finished wqhost command.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// wq runs `wqhost args...` to completion with env added to the environment.
func wq(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, wqhostBin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = testEnv(env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("wqhost %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// mustWQ runs wq and fails the test unless it exits 0.
func mustWQ(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r := wq(t, env, args...)
	if r.code != 0 {
		t.Fatalf("wqhost %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// writeConfig writes a config file into dir and returns its path.
func writeConfig(t *testing.T, dir, yaml string) string {
	t.Helper()
	f := filepath.Join(dir, "wqhost.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// loadConfig loads a config the way the binary does (for reading queues in the test).
func loadConfig(t *testing.T, file string, env []string) *config.Config {
	t.Helper()
	cfg, err := source.LoadConfig(config.LoadOptions{File: file, Environ: testEnv(env...)})
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	return cfg
}

// proc is a running `wqhost run`.
type proc struct {
	t    *testing.T
	bin  string   // what launch starts
	cfg  string   // its --config
	env  []string // its WQHOST_ environment
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	err  error

	mu  sync.Mutex
	log bytes.Buffer
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start starts `wqhost run --config cfg --admin ADDR` without waiting for it to be ready.
func start(t *testing.T, cfg string, env []string) *proc {
	t.Helper()
	return startBin(t, wqhostBin, cfg, env)
}

// startBin is start running the binary bin.
func startBin(t *testing.T, bin, cfg string, env []string) *proc {
	t.Helper()
	p := &proc{t: t, bin: bin, cfg: cfg, env: env}
	p.launch()
	t.Cleanup(func() {
		if p.running() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			keepLog(t, fmt.Sprintf("host-%d.log", p.cmd.Process.Pid), p.logs())
		}
	})
	return p
}

// launch starts the host on a free admin address.
func (p *proc) launch() {
	p.t.Helper()
	p.addr, p.done, p.err = freeAddr(p.t), make(chan struct{}), nil
	p.cmd = exec.Command(p.bin, "run", "--config", p.cfg, "--admin", p.addr)
	p.cmd.Dir = filepath.Dir(p.cfg)
	p.cmd.Env = testEnv(p.env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	cmd, done := p.cmd, p.done
	go func() { p.err = cmd.Wait(); close(done) }()
}

// relaunchIfPortTaken starts an exited host again on a new admin address when it exited
// because its address was taken: between freeAddr closing its probe and the host binding
// the port, any outgoing connection on the machine may take it as its ephemeral port, and
// the fault suite runs beside CI steps that open thousands. It reports whether it did.
func (p *proc) relaunchIfPortTaken() bool {
	p.t.Helper()
	if p.running() || !strings.Contains(p.logs(), "admin.addr "+p.addr) || !strings.Contains(p.logs(), "address already in use") {
		return false
	}
	p.t.Logf("admin address %s was taken before the host bound it; starting it on another", p.addr)
	p.mu.Lock()
	p.log.Reset()
	p.mu.Unlock()
	p.launch()
	return true
}

// startReady starts the host and waits until /readyz answers 200.
func startReady(t *testing.T, cfg string, env []string) *proc {
	t.Helper()
	p := start(t, cfg, env)
	p.waitReady(time.Minute)
	return p
}

func (p *proc) waitReady(limit time.Duration) {
	p.t.Helper()
	waitFor(p.t, limit, "host ready", func() bool {
		if p.relaunchIfPortTaken() {
			return false
		}
		if !p.running() {
			p.t.Fatalf("host exited before it was ready: %v\n%s", p.err, tail(p.logs(), 8<<10))
		}
		resp, err := http.Get("http://" + p.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// waitReadyFast polls /readyz often, for tests that act right after the host is ready.
func (p *proc) waitReadyFast(limit time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if p.relaunchIfPortTaken() {
			continue
		}
		if !p.running() {
			p.t.Fatalf("host exited before it was ready: %v\n%s", p.err, tail(p.logs(), 8<<10))
		}
		if resp, err := http.Get("http://" + p.addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("host not ready after %s", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// kill SIGKILLs the host and waits for it to be gone.
func (p *proc) kill() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(within time.Duration) int {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.wait(within)
}

// wait waits for the host to exit by itself and returns its exit code.
func (p *proc) wait(within time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done: // checked first: with both ready, select would pick at random
	default:
		select {
		case <-p.done:
		case <-time.After(within):
			p.t.Fatalf("host still running after %s\n%s", within, tail(p.logs(), 8<<10))
		}
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	p.t.Fatalf("host: %v", p.err)
	return -1
}

// request makes an admin API request and returns the status code and body.
func (p *proc) request(method, path, token string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequest(method, "http://"+p.addr+path, body)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// status returns a binding's /v1/status entry.
func (p *proc) status(tenant, binding, token string) (host.BindingStatus, error) {
	code, b, err := p.request("GET", "/v1/status", token, nil)
	if err != nil {
		return host.BindingStatus{}, err
	}
	if code != http.StatusOK {
		return host.BindingStatus{}, fmt.Errorf("/v1/status: %d: %s", code, b)
	}
	var st host.Status
	if err := json.Unmarshal(b, &st); err != nil {
		return host.BindingStatus{}, fmt.Errorf("/v1/status: %w", err)
	}
	for _, tn := range st.Tenants {
		for _, bs := range tn.Bindings {
			if tn.Name == tenant && bs.Name == binding {
				return bs, nil
			}
		}
	}
	return host.BindingStatus{}, fmt.Errorf("/v1/status has no binding %s/%s", tenant, binding)
}

func (p *proc) mustStatus(tenant, binding string) host.BindingStatus {
	p.t.Helper()
	bs, err := p.status(tenant, binding, "")
	if err != nil {
		p.t.Fatal(err)
	}
	return bs
}

// waitDrained waits until the binding's input queue is empty and nothing is in flight.
func (p *proc) waitDrained(tenant, binding string, limit time.Duration) host.BindingStatus {
	p.t.Helper()
	return p.waitSettled(tenant, binding, 0, limit)
}

// waitSettled waits until tenant/binding has settled (processed or dead-lettered) at least
// n messages and shows nothing queued or running. The depth alone is not enough: status
// shows the listener's cached depth, which right after a send from another process can
// still be the 0 of the drained queue before it.
func (p *proc) waitSettled(tenant, binding string, n uint64, limit time.Duration) host.BindingStatus {
	p.t.Helper()
	var bs host.BindingStatus
	waitFor(p.t, limit, fmt.Sprintf("%s/%s to settle %d messages", tenant, binding, n), func() bool {
		if !p.running() {
			p.t.Fatalf("host exited: %v\n%s", p.err, tail(p.logs(), 8<<10))
		}
		var err error
		bs, err = p.status(tenant, binding, "")
		return err == nil && bs.Processed+bs.Poisoned >= n && bs.Depth == 0 && bs.InFlight == 0
	})
	return bs
}

// cpuTime returns the user+system CPU time a process has used, from /proc/<pid>/stat.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("cpu time of %d: %v", pid, err)
	}
	// The command name may hold spaces; fields are counted after its closing parenthesis.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("parse /proc/%d/stat: %q", pid, b)
	}
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clkTck
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readAll leases every visible message of a tenant's queue (for ten minutes) and returns
// their bodies. Call it when no host consumes the queue.
func readAll(t *testing.T, cfg *config.Config, tenant, qname string) []*queue.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, closer, err := host.OpenQueue(ctx, cfg, tenant, qname)
	if err != nil {
		t.Fatalf("open %s/%s: %v", tenant, qname, err)
	}
	defer closer.Close()
	var all []*queue.Message
	for {
		ms, err := q.Receive(ctx, queue.MaxBatch, 10*time.Minute)
		if err != nil {
			t.Fatalf("receive from %s/%s: %v", tenant, qname, err)
		}
		if len(ms) == 0 {
			return all
		}
		all = append(all, ms...)
	}
}

func bodies(ms []*queue.Message) [][]byte {
	out := make([][]byte, len(ms))
	for i, m := range ms {
		out[i] = m.Body
	}
	return out
}

// deadLetters lists a queue's dead letters with `wqhost poison list --json`.
func deadLetters(t *testing.T, cfgFile string, env []string, tenant, qname string) []host.DeadLetter {
	t.Helper()
	r := mustWQ(t, env, "poison", "list", "--config", cfgFile, "--tenant", tenant, "--queue", qname, "--json")
	var out []host.DeadLetter
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var d host.DeadLetter
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("poison list --json: %v: %q", err, sc.Text())
		}
		out = append(out, d)
	}
	return out
}

// keepLog saves the log of a process a failed test ran into a directory that outlives
// the test, and names the file in one line. Printed whole, the logs of a few hosts and
// servers would push the failure itself out of the last lines a CI report quotes.
func keepLog(t *testing.T, name, log string) {
	dir := filepath.Join(os.TempDir(), "wqhost-faulttest-logs", strings.ReplaceAll(t.Name(), "/", "_"))
	f := filepath.Join(dir, name)
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(f, []byte(log), 0o644)
	}
	if err != nil {
		t.Logf("%s (not kept: %v), last 2 KiB:\n%s", name, err, tail(log, 2<<10))
		return
	}
	t.Logf("%s kept in %s", name, f)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
