package faulttest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

// releaseBinding is the binding of the scale-in rows: two handler slots, as many messages
// leased ahead, each message sleeping 1.5 s, and max_dequeue_count 1, so that a message
// whose dequeue count a stop raised is dead-lettered at its next delivery ("dequeue count 2
// exceeds max_dequeue_count 1") instead of handled.
func releaseBinding(backend string) string {
	return fmt.Sprintf(`
    bindings:
      slow:
        backend: %s
        queue: jobs
        output: done
        module: %s
        max_dequeue_count: 1
        visibility_timeout: 10m
        pool: {max_instances: 2}
        backoff: {min: 10ms, max: 200ms}
`, backend, fixture("host/testdata/flaky/flaky.wasm"))
}

var releasedLog = regexp.MustCompile(`released leased messages whose handler had not started.* released=(\d+)`)

// scaleInRelease sends n slow messages, runs a host until its handlers are busy and
// messages are leased ahead of them, stops it with SIGTERM (a scale-in) and then lets a
// second host drain the queue. It prints
//
//	fault scale-in-release: backend=B releases=N attempts_spent=S lost=L
//
// where releases are the messages the first host released unstarted (its log) and
// attempts_spent the messages dead-lettered for a dequeue count the release raised. send
// are more arguments of the send (an order group).
func scaleInRelease(t *testing.T, backend, cfgFile string, env []string, send ...string) {
	const n = 12
	args := append([]string{"send", "--config", cfgFile, "--queue", "jobs", "--count", strconv.Itoa(n)}, send...)
	mustWQ(t, env, append(args, "sleep:1500")...)
	p := startReady(t, cfgFile, env)
	waitFor(t, time.Minute, "2 handlers running and messages leased ahead", func() bool {
		bs, err := p.status("default", "slow", "")
		return err == nil && bs.InFlight == 2 && bs.LeasedIdle >= 1
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(2 * time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	releases := 0
	if m := releasedLog.FindStringSubmatch(p.logs()); m != nil {
		releases, _ = strconv.Atoi(m[1])
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // the test reads the queues with the host's config, secrets included
	}
	cfg := loadConfig(t, cfgFile, env)
	done := len(readAll(t, cfg, "default", "done")) // leased for 10 minutes: counted once
	q := startReady(t, cfgFile, env)
	q.waitSettled("default", "slow", uint64(n-done), 3*time.Minute)
	if code := q.stop(time.Minute); code != 0 {
		t.Errorf("second host: exit %d", code)
	}
	done += len(readAll(t, cfg, "default", "done"))
	dl := deadLetters(t, cfgFile, env, "default", "jobs")
	lost := n - done - len(dl)
	fmt.Printf("fault scale-in-release: backend=%s releases=%d attempts_spent=%d lost=%d\n", backend, releases, len(dl), lost)
	if releases == 0 {
		t.Errorf("the stop released no message; the row measured nothing")
	}
	if len(dl) != 0 {
		t.Errorf("%d messages dead-lettered after a stop released them unstarted (first: %s)", len(dl), dl[0].Reason)
	}
	if lost != 0 {
		t.Errorf("%d of %d messages lost", lost, n)
	}
}

// TestFaultScaleInReleaseLocal: the scale-in row on the local store.
func TestFaultScaleInReleaseLocal(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf("data_dir: %s\ntenants:\n  default:%s", filepath.Join(dir, "data"), releaseBinding("local")))
	scaleInRelease(t, "local", cfg, nil)
}

// TestFaultScaleInReleaseNATS: the scale-in row on an R3 stream of a 3-node cluster, where
// NumDelivered cannot be lowered (the release stores a copy carrying the count).
func TestFaultScaleInReleaseNATS(t *testing.T) {
	c := natsCluster(t)
	dir := t.TempDir()
	cfg := c.r3Config(dir, "", releaseBinding("js"))
	scaleInRelease(t, "nats", cfg, nil)
}

// TestFaultScaleInReleaseNATSOrdered: the scale-in row on an ordered binding, every message
// in one order group of an R3 stream: a copy would leave the group's order, so the release
// Naks and counts itself in the stream's R3 key-value bucket <stream>_released.
func TestFaultScaleInReleaseNATSOrdered(t *testing.T) {
	c := natsCluster(t)
	dir := t.TempDir()
	cfg := c.r3Config(dir, "", releaseBinding("js")+"        ordered: true\n")
	scaleInRelease(t, "nats-ordered", cfg, nil, "--order", "1")
}

// TestFaultScaleInReleaseAzurite: the scale-in row on Azurite, where dequeueCount cannot be
// lowered (the release is recorded in the message's envelope).
func TestFaultScaleInReleaseAzurite(t *testing.T) {
	az := azuritetest.Start(t)
	dir := t.TempDir()
	env := []string{"FAULT_AZURE_CONNECTION_STRING=" + az.ConnectionString()}
	cfg := writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
backends:
  az:
    type: azure
    connection_string_env: FAULT_AZURE_CONNECTION_STRING
    create_queues: true
tenants:
  default:%s`, filepath.Join(dir, "data"), releaseBinding("az")))
	scaleInRelease(t, "azurite", cfg, env)
}
