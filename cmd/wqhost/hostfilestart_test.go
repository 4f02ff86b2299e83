package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestHostFileWhileStarting: <data_dir>/host.json is written as soon as the admin API
// serves, not once every binding is up, and `wqhost status --config` finds the host
// through it and shows it starting. The binding's build is held by an Azure endpoint that
// accepts connections and never answers, so the start lasts as long as the test looks.
func TestHostFileWhileStarting(t *testing.T) {
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	var mu sync.Mutex
	var held []net.Conn // never answered; closed when the test ends
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "wqhost.yaml")
	// The admin address is the config's: status must not need --admin.
	addr := freeAddr(t)
	cfg := fmt.Sprintf(`data_dir: %s
admin: {addr: %q}
backends:
  az: {type: azure, connection_string_env: TEST_WQ_AZ, create_queues: true}
tenants:
  default:
    bindings:
      jobs: {backend: az, queue: jobs, module: builtin:echo-go}
`, filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	conn := "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;QueueEndpoint=http://" + hole.Addr().String() + "/devstoreaccount1"
	cmd := exec.Command(wqhostBin, "run", "--config", cfgPath)
	cmd.Dir = dir
	cmd.Env = append(testEnv(), "TEST_WQ_AZ="+conn)
	h := &hostProc{t: t, cmd: cmd, addr: addr, dir: dir, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = h, h
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.err = cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-h.done
		if t.Failed() {
			t.Logf("host log:\n%s", h.logs())
		}
	})
	waitFor(t, time.Minute, "host.json", func() bool {
		select {
		case <-h.done:
			t.Fatalf("host exited: %v\n%s", h.err, h.logs())
		default:
		}
		hf, err := readHostFile(filepath.Join(dir, "data"))
		return err == nil && hf.PID == cmd.Process.Pid && hf.Admin == "http://"+addr
	})
	if strings.Contains(h.logs(), "host ready") {
		t.Fatalf("the host got ready: the test could not look during the start\n%s", h.logs())
	}
	r := wq(t, dir, "status", "--config", cfgPath)
	if r.code != 0 || !strings.Contains(r.stdout, "host starting, 0 of 1 bindings up") {
		t.Errorf("status --config during the start: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Without host.json the config's admin.addr still finds it.
	if err := os.Remove(filepath.Join(dir, "data", hostFileName)); err != nil {
		t.Fatal(err)
	}
	if r := wq(t, dir, "status", "--config", cfgPath); r.code != 0 || !strings.Contains(r.stdout, "host starting") {
		t.Errorf("status --config without host.json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
