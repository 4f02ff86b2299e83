package faulttest

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

// Outage bounds. The listener backs off exponentially on backend errors (from backoff.min
// up to 60s, one prober), so 20s of refused connections should cost a dozen receives, not
// thousands; the CPU bound is 5% of one core.
const (
	outage             = 20 * time.Second
	outageMaxCPU       = outage / 20
	outageMaxReceives  = 40
	outageInFlightSlop = crashBatch * crashWorkers // settlements of messages leased before the outage
)

// TestFaultStorageOutage: Azurite stops for 20s while the host drains a backlog. The host must
// not spin (CPU time and backend calls bounded by the back-off), must stay up and serve its
// admin API, and must resume and finish once storage returns, with nothing lost.
func TestFaultStorageOutage(t *testing.T) {
	az := azuritetest.Start(t)
	dir := t.TempDir()
	env := []string{"FAULT_AZURE_CONNECTION_STRING=" + az.ConnectionString()}
	cfgFile := writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
log: {level: error}
backends:
  az:
    type: azure
    connection_string_env: FAULT_AZURE_CONNECTION_STRING
    create_queues: true
tenants:
  default:%s`, filepath.Join(dir, "data"), crashBinding("az", "10s")))
	const n = 1500
	ids := numbered("o-", n)
	mustWQ(t, env, "send", "--config", cfgFile, "--queue", "jobs", "--count", strconv.Itoa(n), "o-{n}")

	p := startReady(t, cfgFile, env)
	waitFor(t, 2*time.Minute, "100 processed before the outage", func() bool {
		bs, err := p.status("default", "echo", "")
		return err == nil && bs.Processed >= 100
	})
	if err := az.Stop(); err != nil {
		t.Fatal(err)
	}
	before := p.mustStatus("default", "echo")
	cpu0 := cpuTime(t, p.pid())
	time.Sleep(outage)
	cpu1 := cpuTime(t, p.pid())
	after := p.mustStatus("default", "echo") // the admin API answers during the outage
	if !p.running() {
		t.Fatalf("host exited during the outage: %v", p.err)
	}
	if before.Depth == 0 {
		t.Fatal("the backlog drained before the outage: send more messages")
	}
	cpu := cpu1 - cpu0
	receives := after.QueueCalls.Receives - before.QueueCalls.Receives
	errs := after.QueueCalls.Errors - before.QueueCalls.Errors
	calls := receives + (after.QueueCalls.Deletes - before.QueueCalls.Deletes) +
		(after.QueueCalls.Updates - before.QueueCalls.Updates) + (after.QueueCalls.Sends - before.QueueCalls.Sends)
	t.Logf("outage %s: host CPU %s, %d receives, %d backend calls, %d errors (depth %d when it began)", outage, cpu, receives, calls, errs, before.Depth)
	if cpu > outageMaxCPU {
		t.Errorf("host used %s of CPU during a %s outage (limit %s): a hot loop", cpu, outage, outageMaxCPU)
	}
	if receives > outageMaxReceives {
		t.Errorf("%d receives during a %s outage; the error back-off allows about a dozen (limit %d)", receives, outage, outageMaxReceives)
	}
	if calls > outageMaxReceives+outageInFlightSlop {
		t.Errorf("%d backend calls during a %s outage (limit %d)", calls, outage, outageMaxReceives+outageInFlightSlop)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := az.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	p.waitDrained("default", "echo", 5*time.Minute)
	t.Logf("drained %s after storage returned", time.Since(resumed).Round(time.Millisecond))
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("SIGTERM after the outage: exit %d", code)
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	c, missing := countIDs(ids, bodies(readAll(t, loadConfig(t, cfgFile, env), "default", "done")))
	c.injected = 1
	report(t, "storage-outage", c)
	if c.lost != 0 {
		t.Errorf("%d messages lost (e.g. %v)", c.lost, missing)
	}
	if c.duplicated > outageInFlightSlop {
		t.Errorf("%d duplicates; at most %d were in flight when storage went away", c.duplicated, outageInFlightSlop)
	}
	if dl := deadLetters(t, cfgFile, env, "default", "jobs"); len(dl) != 0 {
		t.Errorf("%d messages dead-lettered by the outage; first: %+v", len(dl), dl[0])
	}
}
