package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

type hostProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	dir  string
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
	err  error
}

func (h *hostProc) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.Write(p)
}

func (h *hostProc) logs() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.String()
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

// startHost starts `wqhost run --data-dir DIR --admin ADDR [args]` and waits for /readyz.
func startHost(t *testing.T, dir string, args ...string) *hostProc {
	t.Helper()
	return startHostEnv(t, dir, nil, args...)
}

func startHostEnv(t *testing.T, dir string, env []string, args ...string) *hostProc {
	t.Helper()
	h := &hostProc{t: t, addr: freeAddr(t), dir: dir, done: make(chan struct{})}
	h.cmd = exec.Command(wqhostBin, append([]string{"run", "--data-dir", filepath.Join(dir, "data"), "--admin", h.addr}, args...)...)
	h.cmd.Dir = dir
	h.cmd.Env = append(testEnv(), env...)
	h.cmd.Stdout, h.cmd.Stderr = h, h
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.err = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			h.cmd.Process.Kill()
			<-h.done
		}
		if t.Failed() {
			t.Logf("host log:\n%s", h.logs())
		}
	})
	waitFor(t, time.Minute, "host ready", func() bool {
		select {
		case <-h.done:
			t.Fatalf("host exited: %v\n%s", h.err, h.logs())
		default:
		}
		resp, err := http.Get("http://" + h.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return h
}

func (h *hostProc) get(path string) []byte {
	h.t.Helper()
	resp, err := http.Get("http://" + h.addr + path)
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return b
}

func (h *hostProc) binding(tenant, name string) host.BindingStatus {
	h.t.Helper()
	var st host.Status
	if err := json.Unmarshal(h.get("/v1/status"), &st); err != nil {
		h.t.Fatalf("/v1/status: %v", err)
	}
	for _, tn := range st.Tenants {
		for _, b := range tn.Bindings {
			if tn.Name == tenant && b.Name == name {
				return b
			}
		}
	}
	h.t.Fatalf("/v1/status has no binding %s/%s", tenant, name)
	return host.BindingStatus{}
}

// stop sends sig and waits for the exit; it returns the exit code.
func (h *hostProc) stop(sig os.Signal, within time.Duration) int {
	h.t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		h.t.Fatal(err)
	}
	select {
	case <-h.done:
	case <-time.After(within):
		h.t.Fatalf("host still running %s after %v\n%s", within, sig, h.logs())
	}
	if h.err == nil {
		return 0
	}
	if ee, ok := h.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	h.t.Fatalf("host: %v", h.err)
	return -1
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

// drainQueue leases every message of queue in the local store at path and returns them
// (leased for a minute: call it on a store no host is running on, or on output queues).
func drainQueue(t *testing.T, path, qname string) []*queue.Message {
	t.Helper()
	ctx := context.Background()
	st, err := local.Open(ctx, path, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q, _ := st.Queue(ctx, qname)
	var all []*queue.Message
	for {
		ms, err := q.Receive(ctx, queue.MaxBatch, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return all
		}
		all = append(all, ms...)
	}
}

func metricValue(t *testing.T, metrics, name string, labels ...string) string {
	t.Helper()
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	t.Fatalf("no metric %s%v in /metrics", name, labels)
	return ""
}
