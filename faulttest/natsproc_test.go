package faulttest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The nats fault rows run the cluster as real nats-server processes, so a node can be
// SIGKILLed (no shutdown, no flush: what a crash or an OOM kill leaves) and restarted on its
// store. The binary is built once from the nats-server module go.mod pins, into the test
// cache dir, and reused by later runs of the same version.

var (
	natsServerOnce sync.Once
	natsServerBin  string
	natsServerErr  error
)

// natsServer returns the nats-server binary, building it on first use.
func natsServer(t *testing.T) string {
	t.Helper()
	natsServerOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/nats-io/nats-server/v2").Output()
		if err != nil {
			natsServerErr = fmt.Errorf("go list -m nats-server: %w", err)
			return
		}
		dir := os.Getenv("WQHOST_TEST_CACHE_DIR")
		if dir == "" {
			if dir, err = os.UserCacheDir(); err != nil {
				dir = os.TempDir()
			}
			dir = filepath.Join(dir, "wqhost")
		}
		bin := filepath.Join(dir, "nats-server-"+strings.TrimSpace(string(out)))
		if _, err := os.Stat(bin); err == nil {
			natsServerBin = bin
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			natsServerErr = err
			return
		}
		tmp := fmt.Sprintf("%s.%d", bin, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "github.com/nats-io/nats-server/v2")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			natsServerErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
			return
		}
		natsServerBin, natsServerErr = bin, os.Rename(tmp, bin)
	})
	if natsServerErr != nil {
		t.Fatal(natsServerErr)
	}
	return natsServerBin
}

// natsProcs is a JetStream cluster of nats-server processes on loopback ports.
type natsProcs struct {
	t      *testing.T
	bin    string
	dir    string
	ports  []int
	mports []int // monitoring ports (/healthz)
	routes string
	procs  []*exec.Cmd // nil for a node that is down
	done   []chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startNATSProcs starts n nodes and waits until JetStream answers.
func startNATSProcs(t *testing.T, n int) *natsProcs {
	t.Helper()
	c := &natsProcs{t: t, bin: natsServer(t), dir: t.TempDir(), procs: make([]*exec.Cmd, n), done: make([]chan struct{}, n)}
	var routes []string
	for range n {
		c.ports = append(c.ports, freePort(t))
		c.mports = append(c.mports, freePort(t))
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", freePort(t)))
	}
	c.routes = strings.Join(routes, ",")
	t.Cleanup(c.shutdown)
	t.Cleanup(func() {
		if t.Failed() {
			c.keepLogs()
		}
	})
	for i := range n {
		c.start(i)
	}
	for i := range n {
		c.waitHealthy(i)
	}
	c.waitJetStream(time.Minute)
	return c
}

// clusterPort is node i's route port, taken from the routes list.
func (c *natsProcs) clusterPort(i int) string {
	r := strings.Split(c.routes, ",")[i]
	return r[strings.LastIndex(r, ":")+1:]
}

func (c *natsProcs) start(i int) {
	c.t.Helper()
	name := fmt.Sprintf("n%d", i+1)
	cmd := exec.Command(c.bin, "-n", name, "-a", "127.0.0.1", "-p", fmt.Sprint(c.ports[i]), "-m", fmt.Sprint(c.mports[i]), "-js",
		"-sd", filepath.Join(c.dir, name), "--cluster_name", "wqhost",
		"--cluster", "nats://127.0.0.1:"+c.clusterPort(i), "--routes", c.routes,
		"-l", filepath.Join(c.dir, name+".log"))
	// The node dies with the test process, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start nats-server %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.procs[i], c.done[i] = cmd, done
}

// waitHealthy waits until node i reports itself healthy.
func (c *natsProcs) waitHealthy(i int) {
	c.t.Helper()
	name := fmt.Sprintf("n%d", i+1)
	done := c.done[i]
	// A node accepts clients before its JetStream caught up with the cluster (a client
	// connected to it meanwhile sees API requests time out): /healthz answers 200 once the
	// node is current.
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", c.mports[i]))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-done:
			c.t.Fatalf("nats-server %s exited at start; log:\n%s", name, c.log(i))
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("nats-server %s not healthy after a minute; log:\n%s", name, c.log(i))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *natsProcs) log(i int) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("n%d.log", i+1)))
	return tail(string(b), 4<<10)
}

// keepLogs keeps the nodes' logs of a failed test (keepLog).
func (c *natsProcs) keepLogs() {
	for i := range c.ports {
		name := fmt.Sprintf("n%d.log", i+1)
		b, _ := os.ReadFile(filepath.Join(c.dir, name))
		keepLog(c.t, "nats-server-"+name, string(b))
	}
}

// urls returns every node's client URL.
func (c *natsProcs) urls() []string {
	out := make([]string, len(c.ports))
	for i, p := range c.ports {
		out[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	return out
}

// js connects to the live nodes and returns a JetStream context (closed with the test).
func (c *natsProcs) js() jetstream.JetStream {
	c.t.Helper()
	nc, err := natsgo.Connect(strings.Join(c.urls(), ","), natsgo.MaxReconnects(-1))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return js
}

// waitJetStream waits until the cluster has a meta leader (JetStream answers).
func (c *natsProcs) waitJetStream(limit time.Duration) {
	c.t.Helper()
	js := c.js()
	waitFor(c.t, limit, "a JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
}

// streamLeader returns the index of the node leading stream.
func (c *natsProcs) streamLeader(stream string) int {
	c.t.Helper()
	js := c.js()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		c.t.Fatalf("stream %s: %v", stream, err)
	}
	ci := s.CachedInfo().Cluster
	if ci == nil || !strings.HasPrefix(ci.Leader, "n") {
		c.t.Fatalf("stream %s has no leader: %+v", stream, ci)
	}
	var n int
	fmt.Sscanf(ci.Leader, "n%d", &n)
	return n - 1
}

// kill SIGKILLs node i and waits until it is gone.
func (c *natsProcs) kill(i int) {
	if c.procs[i] == nil {
		return
	}
	_ = c.procs[i].Process.Signal(syscall.SIGKILL)
	<-c.done[i]
	c.procs[i] = nil
}

// freeze SIGSTOPs node i: its connections stay open and unanswered, as with a hung node.
func (c *natsProcs) freeze(i int) { _ = c.procs[i].Process.Signal(syscall.SIGSTOP) }

// thaw SIGCONTs node i.
func (c *natsProcs) thaw(i int) { _ = c.procs[i].Process.Signal(syscall.SIGCONT) }

// restart starts node i again on its ports and store.
func (c *natsProcs) restart(i int) {
	c.start(i)
	c.waitHealthy(i)
}

func (c *natsProcs) shutdown() {
	for i := range c.procs {
		c.kill(i)
	}
}

// waitStreamEmpty waits until the work-queue stream holds no message, as the cluster answers,
// and each host shows nothing in flight: every message was acknowledged, and a host
// publishes a message's output before its ack. After an outage the hosts' own counters
// cannot say this: an ack whose answer was lost took effect on the stream, and the host that
// sent it counts the message neither processed nor failed; nor can a status depth, the
// listener's last read, which can be an old 0.
func (c *natsProcs) waitStreamEmpty(stream string, limit time.Duration, hosts ...*proc) {
	c.t.Helper()
	js := c.js()
	empty := func() (bool, string) {
		for _, p := range hosts {
			if !p.running() {
				c.t.Fatalf("host exited: %v\n%s", p.err, tail(p.logs(), 8<<10))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return false, err.Error()
		}
		info, err := s.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		if info.State.Msgs != 0 {
			return false, fmt.Sprintf("%d messages in %s", info.State.Msgs, stream)
		}
		for _, p := range hosts {
			if bs, err := p.status("default", "echo", ""); err != nil || bs.InFlight != 0 {
				return false, fmt.Sprintf("a host has %d in flight (status: %v)", bs.InFlight, err)
			}
		}
		return true, ""
	}
	deadline := time.Now().Add(limit)
	for {
		ok, last := empty()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for stream %s to be empty and nothing in flight; last: %s", limit, stream, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// r3Config writes a config into dir whose backend js is an R3 work-queue stream of the
// cluster (created as needed) and whose tenant default holds bindings (their YAML, indented
// under the tenant); top is more top-level YAML, such as a log level, or "".
func (c *natsProcs) r3Config(dir, top, bindings string) string {
	c.t.Helper()
	return writeConfig(c.t, dir, fmt.Sprintf(`data_dir: %s
%sbackends:
  js:
    type: nats
    create_queues: true
    nats: {urls: [%s], replicas: 3}
tenants:
  default:%s`, filepath.Join(dir, "data"), top, strings.Join(quoted(c.urls()), ", "), bindings))
}
