package faulttest

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
)

// TestFaultSigtermDrain measures how a host leaves a pod: SIGTERM while its pool's handlers
// are all busy (each message sleeps 4 s) and as many messages are leased ahead of them.
// /readyz turns 503 while the calls still run; the calls in flight finish (their outputs are
// sent), the leased messages that did not start are released (retry-after 0: visible at
// once for another host, although the visibility timeout is 10 minutes), the rest were never
// leased; none is lost, and the host exits 0 within the shutdown grace. It prints
// `sigterm drain: in-flight=N finished=F released=R lost=0 exit=Xs (grace Ys)`.
func TestFaultSigtermDrain(t *testing.T) {
	dir := t.TempDir()
	const n, sleepMs = 20, 4000
	cfgFile := writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
tenants:
  default:
    bindings:
      slow:
        queue: jobs
        output: done
        module: %s
        visibility_timeout: 10m
        pool: {max_instances: 4}
        backoff: {min: 10ms, max: 200ms}
`, filepath.Join(dir, "data"), fixture("host/testdata/flaky/flaky.wasm")))
	mustWQ(t, nil, "send", "--config", cfgFile, "--queue", "jobs", "--count", fmt.Sprint(n), fmt.Sprintf("sleep:%d", sleepMs))

	p := startReady(t, cfgFile, nil)
	// Every slot busy and the prefetch full (max_instances 4, as many prefetched).
	waitFor(t, time.Minute, "4 handlers running and 4 messages leased ahead", func() bool {
		bs, err := p.status("default", "slow", "")
		return err == nil && bs.InFlight == 4 && bs.LeasedIdle == 4
	})
	bs := p.mustStatus("default", "slow")
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The readiness probe fails from the signal on, while the calls still run.
	var readyz int
	for readyz != http.StatusServiceUnavailable && p.running() && time.Since(sent) < time.Minute {
		if resp, err := http.Get("http://" + p.addr + "/readyz"); err == nil {
			readyz = resp.StatusCode
			resp.Body.Close()
		}
		time.Sleep(5 * time.Millisecond)
	}
	notReadyAfter := time.Since(sent)
	grace := listener.DefaultShutdownGrace
	code := p.wait(grace + time.Minute) // a hang fails here
	took := time.Since(sent)
	if readyz != http.StatusServiceUnavailable {
		t.Errorf("/readyz never answered 503 between SIGTERM and exit (last %d)", readyz)
	}
	if code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0 (every call finished within the grace)", code)
	}
	if took > grace {
		t.Errorf("exited %s after SIGTERM, want within the %s grace", took.Round(time.Millisecond), grace)
	}

	cfg := loadConfig(t, cfgFile, nil)
	finished := len(readAll(t, cfg, "default", "done"))
	left := readAll(t, cfg, "default", "jobs") // visible now: released or never leased
	// Leased before the signal, then released: the host logs how many (their dequeue counts
	// are kept, so the queue does not tell them apart from the messages never leased).
	released := 0
	if m := releasedLog.FindStringSubmatch(p.logs()); m != nil {
		released, _ = strconv.Atoi(m[1])
	}
	for _, m := range left {
		if m.DequeueCount > 1 {
			t.Errorf("message %s came back with dequeue count %d after a stop released it unstarted", m.ID, m.DequeueCount)
		}
	}
	lost := n - finished - len(left)
	line := fmt.Sprintf("sigterm drain: in-flight=%d finished=%d released=%d lost=%d exit=%.1fs (grace %.0fs)",
		bs.InFlight, finished, released, lost, took.Seconds(), grace.Seconds())
	fmt.Println(line)
	t.Log(line)
	t.Logf("at SIGTERM: %d leased (%d not started), depth %d; /readyz 503 after %s; %d never leased",
		bs.Leased, bs.LeasedIdle, bs.Depth, notReadyAfter.Round(time.Millisecond), len(left)-released)
	if lost != 0 {
		t.Errorf("%d of %d messages neither finished nor visible in the queue after the exit: lost (or left leased)", lost, n)
	}
	if finished < bs.InFlight {
		t.Errorf("%d outputs, want at least the %d calls in flight at SIGTERM finished", finished, bs.InFlight)
	}
	if released == 0 {
		t.Errorf("no message released: the %d leased ahead of the calls stayed leased (the visibility timeout is 10 minutes)", bs.LeasedIdle)
	}
	if dl := deadLetters(t, cfgFile, nil, "default", "jobs"); len(dl) != 0 {
		t.Errorf("%d messages dead-lettered by the drain (first: %+v)", len(dl), dl[0])
	}
}
