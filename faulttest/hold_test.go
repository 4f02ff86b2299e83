package faulttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
	"github.com/wqhost/wqhost/listener"
)

// The fault-hook build: the real binary built with the wqhost_faulthooks tag, whose host
// module adds wqhost.fault_block(ms), a host call that blocks its guest for ms milliseconds
// ignoring the time limit, the caller's context and shutdown (runtime/faulthook_on.go).
// Nothing a real guest can do blocks like that once every host call checks its deadline;
// the hook stands for the host call with a bug, so the test holds whatever the host calls do.
var (
	hookBinOnce sync.Once
	hookBin     string
	hookBinErr  error
)

func faultHookBinary(t *testing.T) string {
	t.Helper()
	hookBinOnce.Do(func() {
		hookBin = filepath.Join(filepath.Dir(wqhostBin), "wqhost-faulthooks")
		cmd := exec.Command("go", "build", "-tags", "wqhost_faulthooks", "-o", hookBin, "./cmd/wqhost")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			hookBinErr = fmt.Errorf("go build -tags wqhost_faulthooks ./cmd/wqhost: %v\n%s", err, out)
		}
	})
	if hookBinErr != nil {
		t.Fatal(hookBinErr)
	}
	return hookBin
}

// blockingModule is a wqhost/v1 module whose handler blocks in wqhost.fault_block for ten
// minutes on every message.
func blockingModule() []byte {
	return wasmtest.ModuleImporting([]wasmtest.Import{{Module: "wqhost", Name: "fault_block", Params: []byte{wasmtest.I32}}}, 1,
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32},
			Body: append(append(wasmtest.I32Const(600_000), wasmtest.Call(0)...), wasmtest.I32Const(0)...)},
	)
}

// TestFaultSigtermUnstoppableGuest: SIGTERM while every handler is blocked in a host call
// that ignores its time limit and the shutdown. The host exits within the shutdown grace
// plus 5 s (exit 1), its log naming the binding and the messages it abandoned, which stay
// leased; a host restarted on the same queue with a working module processes every message
// once their visibility timeout passes: none lost.
func TestFaultSigtermUnstoppableGuest(t *testing.T) {
	dir := t.TempDir()
	mod := filepath.Join(dir, "block.wasm")
	if err := os.WriteFile(mod, blockingModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 20
	binding := func(module string) string {
		return writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
log: {level: info}
tenants:
  default:
    limits: {timeout: 2s}
    bindings:
      b:
        queue: jobs
        output: done
        module: %s
        visibility_timeout: 5s
        pool: {max_instances: 4}
        backoff: {min: 10ms, max: 200ms}
`, filepath.Join(dir, "data"), module))
	}
	cfgFile := binding(mod)
	ids := numbered("m-", n)
	mustWQ(t, nil, "send", "--config", cfgFile, "--queue", "jobs", "--count", fmt.Sprint(n), "m-{n}")
	var c tally
	defer func() { report(t, "sigterm-unstoppable-guest", c) }()
	c.sent, c.lost, c.injected = n, n, 1

	p := startBin(t, faultHookBinary(t), cfgFile, nil)
	p.waitReady(time.Minute)
	waitFor(t, time.Minute, "handlers blocked", func() bool {
		bs, err := p.status("default", "b", "")
		return err == nil && bs.InFlight > 0
	})
	time.Sleep(time.Second) // let the listener scale up to its slots
	bs := p.mustStatus("default", "b")
	t.Logf("before SIGTERM: %d handlers blocked, %d leased, depth %d", bs.InFlight, bs.Leased, bs.Depth)
	sent := time.Now()
	bound := listener.DefaultShutdownGrace + 5*time.Second
	code := p.stop(bound + time.Minute) // a hang fails here, after the bound is reported below
	took := time.Since(sent)
	t.Logf("SIGTERM with handlers blocked in a host call: exit %d after %s (grace %s)", code, took.Round(time.Millisecond), listener.DefaultShutdownGrace)
	if took > bound {
		t.Errorf("host exited %s after SIGTERM, want within the grace plus 5 s (%s)", took.Round(time.Millisecond), bound)
	}
	logs := p.logs()
	if code != 1 || !strings.Contains(logs, "abandoned") || !strings.Contains(logs, "binding=b") ||
		!strings.Contains(logs, `message_ids="[`) || strings.Contains(logs, `message_ids="[]"`) {
		t.Errorf("exit %d; want 1 with a log naming the abandoned binding and its messages:\n%s", code, tail(logs, 4<<10))
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "abandoned") {
			t.Logf("log: %s", line)
		}
	}

	// The same queue served by a working module: the abandoned messages come back once their
	// lease runs out, the released ones at once.
	cfgFile = binding("builtin:echo-go")
	p = startReady(t, cfgFile, nil)
	waitFor(t, 2*time.Minute, "every message processed", func() bool {
		bs, err := p.status("default", "b", "")
		return err == nil && bs.Processed >= n
	})
	if code := p.stop(time.Minute); code != 0 {
		t.Errorf("second host: SIGTERM exit %d", code)
	}
	cfg := loadConfig(t, cfgFile, nil)
	counted, missing := countIDs(ids, bodies(readAll(t, cfg, "default", "done")))
	counted.injected = 1
	c = counted
	if c.lost != 0 {
		t.Errorf("%d of %d messages lost (e.g. %v)", c.lost, n, missing)
	}
	if c.duplicated != 0 {
		t.Errorf("%d duplicates: a message ran twice to completion", c.duplicated)
	}
	if dl := deadLetters(t, cfgFile, nil, "default", "jobs"); len(dl) != 0 {
		t.Errorf("%d messages dead-lettered: an abandoned call counted against them (first: %+v)", len(dl), dl[0])
	}
}
