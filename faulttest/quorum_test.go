package faulttest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFaultNATSQuorumLoss: a host drains an R3 stream; two of the three nodes are SIGKILLed
// for 20 s (no quorum: no stream or consumer leader) and started again on their stores. From
// the moment the cluster serves again (the durable consumer's info is answered and the
// output stream takes a publish), work must resume within 2 s whatever the outage's length:
// the failed receives of one outage count once per back-off round, and the nats backend's
// probe ends the back-off (before, the
// workers' concurrent failures pushed the back-off to its 60 s cap at once: the queue stood
// still for ~45 s with a healthy cluster). The stream was made beforehand as R1 by another
// program: the host raises it to the config's replicas: 3 (or the outage would lose it).
func TestFaultNATSQuorumLoss(t *testing.T) { quorumLoss(t, false) }

// TestFaultNATSQuorumLossSIGSTOP is TestFaultNATSQuorumLoss with the two nodes SIGSTOPped
// and SIGCONTed instead: their connections stay open and unanswered (a hung node, a VM
// paused), and a host connected to one of them must not wait for it longer than it takes.
func TestFaultNATSQuorumLossSIGSTOP(t *testing.T) { quorumLoss(t, true) }

func quorumLoss(t *testing.T, freeze bool) {
	c := natsCluster(t)
	cfg := natsConfig(t, c, t.TempDir())
	if freeze {
		// The host connects to a node that will hang (it learns the others from it).
		one := *c
		one.ports = c.ports[1:2]
		cfg = natsConfig(t, &one, t.TempDir())
	}
	js := c.js()
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WQ_jobs", Subjects: []string{"wqhost.q.jobs"},
		Retention: jetstream.WorkQueuePolicy, Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	const n = 4000
	ids := numbered("m-", n)
	mustWQ(t, nil, "send", "--config", cfg, "--queue", "jobs", "--count", strconv.Itoa(n), "m-{n}")
	s, err := js.Stream(ctx, "WQ_jobs")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("stream WQ_jobs has %d replicas after a process opened it with replicas: 3; want them raised to 3", r)
	}
	p := start(t, cfg, nil)
	p.waitReadyFast(time.Minute)
	processed := func() uint64 {
		bs, err := p.status("default", "echo", "")
		if err != nil {
			return 0
		}
		return bs.Processed
	}
	waitFor(t, 2*time.Minute, "the drain under way", func() bool { return processed() >= 200 })
	cons, err := js.Consumer(ctx, "WQ_jobs", "wqhost")
	if err != nil {
		t.Fatal(err)
	}
	out, err := js.Stream(ctx, "WQ_done")
	if err != nil {
		t.Fatal(err)
	}
	const down = 20 * time.Second
	for _, i := range []int{1, 2} {
		if freeze {
			c.freeze(i)
		} else {
			c.kill(i)
		}
	}
	time.Sleep(down)
	before := processed()
	if before >= n {
		t.Fatalf("the drain finished during the outage (%d processed): nothing left to resume", before)
	}
	for _, i := range []int{1, 2} {
		if freeze {
			c.thaw(i)
		} else {
			c.start(i)
		}
	}
	var served time.Time
	waitFor(t, 2*time.Minute, "the cluster to serve again", func() bool {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if _, err := cons.Info(cctx); err != nil {
			return false
		}
		// The handler's output goes to WQ_done: a message is processed once both serve,
		// the output stream taking writes (the body is no id: the count ignores it).
		if _, err := out.Info(cctx); err != nil {
			return false
		}
		if _, err := js.Publish(cctx, "wqhost.q.done", []byte("probe")); err != nil {
			return false
		}
		served = time.Now()
		return true
	})
	atServe := processed()
	var resumed time.Time
	deadline := served.Add(2 * time.Minute)
	for resumed.IsZero() {
		if processed() > atServe {
			resumed = time.Now()
		} else if time.Now().After(deadline) {
			t.Fatalf("no message processed within 2 minutes of the cluster serving again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	after := resumed.Sub(served)
	c.waitHealthy(1)
	c.waitHealthy(2)
	c.waitStreamEmpty("WQ_jobs", 5*time.Minute, p)
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	cnt, missing := countIDs(ids, bodies(readAll(t, loadConfig(t, cfg, nil), "default", "done")))
	name := "nats-quorum-loss"
	if freeze {
		name += "-sigstop"
	}
	line := fmt.Sprintf("fault %s: down=%s resumed_after_cluster=%.1fs lost=%d duplicated=%d", name, down, after.Seconds(), cnt.lost, cnt.duplicated)
	fmt.Println(line)
	t.Log(line)
	if cnt.lost != 0 {
		t.Errorf("%d of %d messages lost (e.g. %v)", cnt.lost, n, missing)
	}
	if after > 2*time.Second {
		t.Errorf("work resumed %s after the cluster served again; want at most 2s", after)
	}
	// At most what was leased when the nodes went down can run twice.
	if bound := crashSlots + crashPrefetch; cnt.duplicated > bound {
		t.Errorf("%d duplicates after a quorum loss; at most %d were leased", cnt.duplicated, bound)
	}
}

// TestFaultNATSStartWithoutQuorum: the real binary started while only one of three nodes
// runs (no JetStream meta leader) must not exit (it exited 2, "config invalid", after 5 s):
// /healthz answers, /readyz answers 503 naming the binding; once the other nodes are up it
// turns ready and drains what is sent.
func TestFaultNATSStartWithoutQuorum(t *testing.T) {
	c := natsCluster(t)
	cfg := natsConfig(t, c, t.TempDir())
	c.kill(1)
	c.kill(2)
	p := start(t, cfg, nil)
	var last string
	named := false
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if p.relaunchIfPortTaken() {
			continue
		}
		if !p.running() {
			t.Fatalf("the host exited without quorum: %v\n%s", p.err, tail(p.logs(), 8<<10))
		}
		code, body, err := p.request("GET", "/readyz", "", nil)
		if err != nil {
			continue
		}
		last = fmt.Sprintf("%d %s", code, body)
		if code == 200 {
			t.Fatalf("/readyz 200 without quorum: %s", body)
		}
		named = named || code == 503 && strings.Contains(string(body), "tenants.default.bindings.echo")
	}
	if !named {
		t.Fatalf("/readyz never answered 503 naming the binding without quorum; last: %s", last)
	}
	if code, _, err := p.request("GET", "/healthz", "", nil); err != nil || code != 200 {
		t.Errorf("/healthz %d, %v while waiting for quorum; want 200", code, err)
	}
	t.Logf("without quorum: /readyz %s", last)
	c.start(1)
	c.start(2)
	t0 := time.Now()
	// When the cluster itself answers again, for the log: ready_after_quorum includes the
	// nodes' own start and election.
	answered := make(chan time.Duration, 1)
	go func() {
		nc, err := natsgo.Connect(strings.Join(c.urls(), ","))
		if err != nil {
			answered <- -1
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		for time.Since(t0) < 2*time.Minute {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			_, err := js.AccountInfo(ctx)
			cancel()
			if err == nil {
				answered <- time.Since(t0)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		answered <- -1
	}()
	p.waitReadyFast(2 * time.Minute)
	ready := time.Since(t0)
	t.Logf("JetStream answered %s after the nodes were started; the host was ready after %s", <-answered, ready)
	const n = 300
	ids := numbered("m-", n)
	mustWQ(t, nil, "send", "--config", cfg, "--queue", "jobs", "--count", strconv.Itoa(n), "m-{n}")
	p.waitSettled("default", "echo", n, 2*time.Minute)
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	cnt, missing := countIDs(ids, bodies(readAll(t, loadConfig(t, cfg, nil), "default", "done")))
	line := fmt.Sprintf("fault nats-start-without-quorum: exit=none ready_after_quorum=%.1fs lost=%d", ready.Seconds(), cnt.lost)
	fmt.Println(line)
	t.Log(line)
	if cnt.lost != 0 {
		t.Errorf("%d of %d messages lost (e.g. %v)", cnt.lost, n, missing)
	}
}

// TestFaultNATSNodeHang: the node a host is connected to hangs (SIGSTOP) for 40 s mid-drain
// while the other two serve. Its connection stays open and answers nothing, so only the
// client's pings notice it; the host must move to another node and go on during the hang
// (the client's default pings took 6 minutes: the host stood idle for all of it).
func TestFaultNATSNodeHang(t *testing.T) {
	c := natsCluster(t)
	one := *c
	one.ports = c.ports[1:2] // the host connects to node 1 (it learns the others from it)
	cfg := natsConfig(t, &one, t.TempDir())
	const n = 4000
	ids := numbered("m-", n)
	mustWQ(t, nil, "send", "--config", cfg, "--queue", "jobs", "--count", strconv.Itoa(n), "m-{n}")
	p := start(t, cfg, nil)
	p.waitReadyFast(time.Minute)
	processed := func() uint64 {
		bs, err := p.status("default", "echo", "")
		if err != nil {
			return 0
		}
		return bs.Processed
	}
	waitFor(t, 2*time.Minute, "the drain under way", func() bool { return processed() >= 200 })
	const hang = 40 * time.Second
	c.freeze(1)
	hungAt := time.Now()
	// Calls in flight on the hung node finish only with it: the first message processed
	// after a second went through another node.
	time.Sleep(time.Second)
	base := processed()
	var resumed time.Duration
	for time.Since(hungAt) < hang {
		if processed() > base {
			resumed = time.Since(hungAt)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rest := hang - time.Since(hungAt); rest > 0 {
		time.Sleep(rest)
	}
	c.thaw(1)
	c.waitHealthy(1)
	c.waitStreamEmpty("WQ_jobs", 5*time.Minute, p)
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	cnt, missing := countIDs(ids, bodies(readAll(t, loadConfig(t, cfg, nil), "default", "done")))
	got := "none"
	if resumed > 0 {
		got = fmt.Sprintf("%.1fs", resumed.Seconds())
	}
	line := fmt.Sprintf("fault nats-node-hang: hang=%s resumed_during_hang=%s lost=%d duplicated=%d", hang, got, cnt.lost, cnt.duplicated)
	fmt.Println(line)
	t.Log(line)
	if cnt.lost != 0 {
		t.Errorf("%d of %d messages lost (e.g. %v)", cnt.lost, n, missing)
	}
	if resumed == 0 {
		t.Errorf("no message processed during the %s the host's node hung, with two nodes serving", hang)
	}
	if bound := crashSlots + crashPrefetch; cnt.duplicated > bound {
		t.Errorf("%d duplicates after a node hang; at most %d were leased", cnt.duplicated, bound)
	}
}
