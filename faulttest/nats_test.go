package faulttest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/nats/natstest"
)

// natsCluster starts a 3-node JetStream cluster in this process (embedded servers on
// loopback ports, stores under the test's temp dir); the wqhost children connect to it over
// loopback.
func natsCluster(t *testing.T) *natstest.Cluster {
	t.Helper()
	c, err := natstest.StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// natsConfig is the crash binding on an R3 stream of c.
func natsConfig(t *testing.T, c *natstest.Cluster, dir string) string {
	urls := make([]string, len(c.URLs()))
	for i, u := range c.URLs() {
		urls[i] = strconv.Quote(u)
	}
	return writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
log: {level: warn}
backends:
  js:
    type: nats
    create_queues: true
    nats: {urls: [%s], replicas: 3, ack_wait: 5s, pull_hold: 30s, pull_heartbeat: 1s}
tenants:
  default:%s`, filepath.Join(dir, "data"), strings.Join(urls, ", "), crashBinding("js", "5s")))
}

// TestFaultNATSHostCrash: SIGKILL a wqhost host mid-drain of an R3 JetStream stream several
// times; every message is processed at least once, duplicates bounded by what was leased.
func TestFaultNATSHostCrash(t *testing.T) {
	c := natsCluster(t)
	cfg := natsConfig(t, c, t.TempDir())
	crashRun(t, "nats-host-crash", cfg, nil, 3000, 3, 300, true)
}

// TestFaultNATSNodeKill: two wqhost hosts compete on one R3 stream; mid-drain the node that
// leads the stream is shut down, and restarted on its store once the drain went on without
// it. No message is lost; duplicates (acks the old leader took and did not replicate,
// outputs whose publish was retried) stay within what was in flight at the kill.
func TestFaultNATSNodeKill(t *testing.T) {
	c := natsCluster(t)
	cfg := natsConfig(t, c, t.TempDir())
	const n, hosts = 3000, 2
	ids := numbered("m-", n)
	mustWQ(t, nil, "send", "--config", cfg, "--queue", "jobs", "--count", strconv.Itoa(n), "m-{n}")
	var ps []*proc
	for range hosts {
		p := start(t, cfg, nil)
		p.waitReadyFast(time.Minute)
		ps = append(ps, p)
	}
	processed := func() (sum, inFlight uint64) {
		for _, p := range ps {
			if bs, err := p.status("default", "echo", ""); err == nil {
				sum += bs.Processed
				inFlight += uint64(bs.InFlight)
			}
		}
		return sum, inFlight
	}
	waitFor(t, 3*time.Minute, "a third of the drain", func() bool { s, _ := processed(); return s >= n/3 })
	leader := c.StreamLeader("WQ_jobs")
	if leader < 0 {
		t.Fatal("no leader for stream WQ_jobs")
	}
	before, inFlight := processed()
	c.Kill(leader)
	t.Logf("killed node n%d (stream leader) after %d processed, %d in flight", leader+1, before, inFlight)
	waitFor(t, 3*time.Minute, "the drain to go on without the killed node", func() bool { s, _ := processed(); return s >= before+n/3 })
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		p.waitDrained("default", "echo", 5*time.Minute)
	}
	for _, p := range ps {
		if code := p.stop(time.Minute); code != 0 {
			t.Fatalf("SIGTERM: exit %d", code)
		}
	}
	ccfg := loadConfig(t, cfg, nil)
	cnt, missing := countIDs(ids, bodies(readAll(t, ccfg, "default", "done")))
	cnt.injected = 1
	report(t, "nats-node-kill", cnt)
	if cnt.lost != 0 {
		t.Errorf("%d of %d messages lost (e.g. %v)", cnt.lost, n, missing)
	}
	bound := hosts * (crashSlots + crashPrefetch)
	fmt.Printf("nats-node-kill: duplicates=%d bound=%d (hosts %d × (slots %d + prefetch %d) in flight at the kill; %d measured in flight)\n",
		cnt.duplicated, bound, hosts, crashSlots, crashPrefetch, inFlight)
	if cnt.duplicated > bound {
		t.Errorf("%d duplicates after one node kill; at most %d were in flight", cnt.duplicated, bound)
	}
	if dl := deadLetters(t, cfg, nil, "default", "jobs"); len(dl) != 0 {
		t.Errorf("%d messages dead-lettered by the node kill; first: %+v", len(dl), dl[0])
	}
}
