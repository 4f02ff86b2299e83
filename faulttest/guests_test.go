package faulttest

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostileConfig: tenant "bad" runs the misbehaving guests under tight limits, tenant "good"
// an echo binding whose backlog must keep draining meanwhile.
func hostileConfig(t *testing.T, dir string) string {
	return writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
log: {level: error}
tenants:
  bad:
    limits: {memory: 64MiB, timeout: 2s, max_output_bytes: 1MiB}
    bindings:
      guest:
        queue: hostile
        output: hostile-out
        module: %s
        max_dequeue_count: 3
        visibility_timeout: 5s
        backoff: {min: 10ms, max: 200ms}
        poison: {base_delay: 100ms, max_delay: 300ms}
        # The loop and bomb guests fail expensively (time and memory limit) on every delivery,
        # and a trap on a loaded machine can run past cheap_failure (timeout/10): with the
        # default max_cooldown (8 x 2s) the breaker's probes alone could take 12 x 18s, past the
        # settle wait below. The breaker's own timing is tested in host.
        breaker: {max_cooldown: 4s}
      outputs:
        queue: outputs
        output: outputs-out
        module: %s
        max_dequeue_count: 3
        visibility_timeout: 5s
        backoff: {min: 10ms, max: 200ms}
        poison: {base_delay: 100ms, max_delay: 300ms}
        breaker: {max_cooldown: 4s}
  good:
    bindings:
      steady:
        queue: steady
        output: steady-out
        module: builtin:echo-go
        backoff: {min: 10ms, max: 200ms}
`, filepath.Join(dir, "data"), fixture("runtime/testdata/guest/guest.wasm"), fixture("runtime/testdata/hostile/hostile.wasm")))
}

// TestFaultHostileGuests: traps, endless loops, memory bombs, out-of-bounds pointers, huge
// and too many outputs, a stdout flood. The host stays up, each bad message is retried and
// then dead-lettered with its reason (or rejected at once when the guest says so), the good
// messages of the same bindings go through, and another tenant's backlog keeps draining.
func TestFaultHostileGuests(t *testing.T) {
	dir := t.TempDir()
	cfgFile := hostileConfig(t, dir)
	p := startReady(t, cfgFile, nil)
	send := func(tenant, queue string, args ...string) {
		mustWQ(t, nil, append([]string{"send", "--config", cfgFile, "--tenant", tenant, "--queue", queue}, args...)...)
	}
	const steadyN = 3000

	// Baseline: the steady backlog alone.
	send("good", "steady", "--count", strconv.Itoa(steadyN), "a-{n}")
	t0 := time.Now()
	p.waitSettled("good", "steady", steadyN, 2*time.Minute)
	alone := time.Since(t0)

	// The same backlog again while the hostile guests misbehave.
	type bad struct{ body, reason string }
	failing := []bad{ // retried max_dequeue_count times, then dead-lettered
		{"trap", "handler call"},
		{"loop", "time limit"},
		{"bomb", "handler call"},
		{"oob", "outside the guest memory"},
	}
	rejected := []bad{ // the guest rejects: dead-lettered at once with its text
		{"huge:8", "emit=-3"},
		{"spam:1000", "emit=-4"},
	}
	for _, b := range failing {
		send("bad", "hostile", b.body)
	}
	for _, b := range rejected {
		send("bad", "outputs", b.body)
	}
	send("bad", "outputs", "flood:4")
	send("bad", "hostile", "--count", "20", "g-{n}")
	send("bad", "outputs", "--count", "20", "h-{n}")
	t1 := time.Now()
	send("good", "steady", "--count", strconv.Itoa(steadyN), "b-{n}")
	p.waitSettled("good", "steady", 2*steadyN, 2*time.Minute)
	during := time.Since(t1)
	hostileLeft := p.mustStatus("bad", "guest").Depth
	t.Logf("steady backlog of %d: %s alone, %s beside the hostile guests (%.2fx); %d hostile messages still unsettled when it drained",
		steadyN, alone.Round(time.Millisecond), during.Round(time.Millisecond), during.Seconds()/alone.Seconds(), hostileLeft)

	// guest: 20 good messages and 4 dead-lettered; outputs: 20 good, flood:4, 2 rejected.
	p.waitSettled("bad", "guest", 24, 3*time.Minute)
	p.waitSettled("bad", "outputs", 23, 3*time.Minute)
	if code, _, err := p.request("GET", "/healthz", "", nil); err != nil || code != http.StatusOK {
		t.Fatalf("host unhealthy after the hostile guests: %d %v", code, err)
	}
	for _, b := range []string{"guest", "outputs"} {
		bs := p.mustStatus("bad", b)
		t.Logf("%s binding: processed %d failed %d retried %d poisoned %d, pool traps %d timeouts %d discarded %d", b,
			bs.Processed, bs.Failed, bs.Retried, bs.Poisoned, bs.Pool.Traps, bs.Pool.Timeouts, bs.Pool.Discarded)
	}
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}

	// Every bad message is in its poison queue with a reason; good ones were processed.
	check := func(queue string, want []bad, dequeues int) int {
		dead := deadLetters(t, cfgFile, nil, "bad", queue)
		byBody := map[string][]string{}
		for _, d := range dead {
			byBody[string(d.Body)] = append(byBody[string(d.Body)], d.Reason)
			if dequeues > 0 && d.DequeueCount != dequeues {
				t.Errorf("%s: %q dead-lettered after %d deliveries, want %d", queue, d.Body, d.DequeueCount, dequeues)
			}
		}
		n := 0
		for _, w := range want {
			rs := byBody[w.body]
			switch {
			case len(rs) == 0:
				t.Errorf("%s: %q is not in %s-poison (dead letters: %v)", queue, w.body, queue, byBody)
			case !strings.Contains(rs[0], w.reason):
				t.Errorf("%s: %q dead-lettered with reason %q, want it to mention %q", queue, w.body, rs[0], w.reason)
			default:
				n++
				t.Logf("%s-poison: %q: %s", queue, w.body, rs[0])
			}
		}
		if len(dead) != len(want) {
			t.Errorf("%s-poison holds %d dead letters, want %d: %v", queue, len(dead), len(want), byBody)
		}
		return n
	}
	poisoned := check("hostile", failing, 3) + check("outputs", rejected, 1)

	cfg := loadConfig(t, cfgFile, nil)
	good := append(numbered("g-", 20), numbered("h-", 20)...)
	good = append(good, "flood:4")
	outs := bodies(readAll(t, cfg, "bad", "hostile-out"))
	outs = append(outs, bodies(readAll(t, cfg, "bad", "outputs-out"))...)
	cg, missing := countIDs(good, outs)
	if cg.lost != 0 {
		t.Errorf("good messages of the hostile bindings lost: %d (e.g. %v)", cg.lost, missing)
	}
	steadyIDs := append(numbered("a-", steadyN), numbered("b-", steadyN)...)
	cs, missing := countIDs(steadyIDs, bodies(readAll(t, cfg, "good", "steady-out")))
	if cs.lost != 0 {
		t.Errorf("steady messages lost: %d (e.g. %v)", cs.lost, missing)
	}
	c := tally{
		sent:       len(failing) + len(rejected) + cg.sent + cs.sent,
		processed:  poisoned + cg.processed + cs.processed,
		lost:       len(failing) + len(rejected) - poisoned + cg.lost + cs.lost,
		duplicated: cg.duplicated + cs.duplicated,
		injected:   len(failing) + len(rejected) + 1,
	}
	report(t, "hostile-guests", c)
	if c.duplicated != 0 {
		t.Errorf("%d duplicates without any crash", c.duplicated)
	}
}

// TestFaultUnknownImport: a module importing a host function wqhost lacks is refused at load
// time: exit 2, naming the file and the missing import; nothing starts.
func TestFaultUnknownImport(t *testing.T) {
	dir := t.TempDir()
	mod := fixture("runtime/testdata/badimport/badimport.wasm")
	cfgFile := writeConfig(t, dir, fmt.Sprintf("data_dir: %s\ntenants:\n  default:\n    bindings:\n      b:\n        queue: jobs\n        module: %s\n",
		filepath.Join(dir, "data"), mod))
	p := start(t, cfgFile, nil)
	code := p.wait(time.Minute)
	logs := p.logs()
	t.Logf("exit %d: %s", code, strings.TrimSpace(logs))
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, want := range []string{mod, "wqhost.no_such_function", "tenants.default.bindings.b"} {
		if !strings.Contains(logs, want) {
			t.Errorf("error does not name %q", want)
		}
	}
	ok := 0
	if code == 2 && strings.Contains(logs, "wqhost.no_such_function") {
		ok = 1
	}
	report(t, "unknown-import", tally{sent: 1, processed: ok, lost: 1 - ok, injected: 1})
}

// TestFaultStartNeverReturns: a module whose start function (_initialize) never returns.
// Loading it must end within a bounded time — the host refuses it (exit 2 naming the module,
// as for any module that cannot load) or runs without it — and SIGTERM must stop the host
// even while it loads.
func TestFaultStartNeverReturns(t *testing.T) {
	dir := t.TempDir()
	mod := fixture("runtime/testdata/hang/hang.wasm")
	cfgFile := writeConfig(t, dir, fmt.Sprintf("data_dir: %s\ntenants:\n  default:\n    limits: {timeout: 2s}\n    bindings:\n      b:\n        queue: jobs\n        module: %s\n",
		filepath.Join(dir, "data"), mod))
	const limit = 30 * time.Second
	ok := 0
	defer func() { report(t, "start-never-returns", tally{sent: 2, processed: ok, lost: 2 - ok, injected: 2}) }()

	p := start(t, cfgFile, nil)
	select {
	case <-p.done:
		code := p.wait(0)
		if code != 2 || !strings.Contains(p.logs(), mod) {
			t.Errorf("host loading a never-returning start function: exit %d, want 2 naming %s: %s", code, mod, p.logs())
		} else {
			ok++
		}
	case <-time.After(limit):
		code, _, err := p.request("GET", "/readyz", "", nil)
		if err != nil || code != http.StatusOK {
			t.Errorf("host still loading a module whose start function never returns after %s (not ready, no error; CPU %s): instantiation has no time limit", limit, cpuTime(t, p.pid()))
		} else {
			ok++
		}
		p.kill()
	}

	// SIGTERM while loading.
	p = start(t, cfgFile, nil)
	time.Sleep(2 * time.Second)
	if p.running() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			ok++
		case <-time.After(10 * time.Second):
			t.Errorf("host ignored SIGTERM for 10s while loading a module whose start function never returns")
			p.kill()
		}
	} else {
		ok++
	}
}
