package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/nats/natstest"
)

// A host started while its backend cannot serve (no NATS server on its URL yet) does not
// fail its start: /healthz answers, /readyz answers 503 naming the binding and the reason,
// and once the server is up the start completes and /readyz turns 200. (Before, New failed
// at once and the CLI exited 2, "config invalid".)
func TestStartWaitsForAnUnavailableBackend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	dir := t.TempDir()
	y := fmt.Sprintf("data_dir: %s\ncache_dir: %s\nadmin: {addr: \"127.0.0.1:0\"}\n"+
		"backends:\n  js:\n    type: nats\n    create_queues: true\n    nats: {urls: [\"nats://u:secret@127.0.0.1:%d\"], storage: memory}\n"+
		"tenants:\n  acme:\n    bindings:\n      echo:\n        queue: in\n        backend: js\n        module: %q\n",
		filepath.Join(dir, "data"), cacheDir, port, echo)
	cfg, err := config.Parse([]byte(y), dir)
	if err != nil {
		t.Fatal(err)
	}
	addr := make(chan net.Addr, 1)
	type result struct {
		h   *Host
		err error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		h, err := newWithHooks(ctx, cfg, testLogger(t), startHooks{served: func(a net.Addr) { addr <- a }})
		done <- result{h, err}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a.String()
	case r := <-done:
		t.Fatalf("New returned before serving the admin API: %v", r.err)
	case <-time.After(time.Minute):
		t.Fatal("no admin API within a minute")
	}
	var body struct {
		Status  string   `json:"status"`
		Waiting []string `json:"waiting"`
	}
	get := func(path string) int {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body.Status, body.Waiting = "", nil
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode
	}
	eventually(t, "/readyz naming the waiting binding", func() bool {
		return get("/readyz") == http.StatusServiceUnavailable && len(body.Waiting) == 1
	})
	if !strings.Contains(body.Status, "tenants.acme.bindings.echo") || !strings.Contains(body.Waiting[0], "no servers available") ||
		strings.Contains(body.Status, "secret") {
		t.Errorf("/readyz status %q, waiting %q; want the binding named, the reason, and no password", body.Status, body.Waiting)
	}
	if c := get("/healthz"); c != http.StatusOK {
		t.Errorf("/healthz %d while waiting for the backend; want 200", c)
	}
	select {
	case r := <-done:
		t.Fatalf("New returned while the backend is down: %v", r.err)
	case <-time.After(time.Second):
	}
	s, err := natstest.Start(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Username: "u", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("New after the server came up: %v", r.err)
		}
		defer r.h.Close(context.Background())
		if c := get("/readyz"); c != http.StatusOK {
			t.Errorf("/readyz %d %q once the backend serves; want 200", c, body.Status)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("New did not return within 30s of the server's start")
	}
}

// An open that hangs (no answer from the backend) is named in /readyz too, not only one
// that failed; an error waiting cannot fix is returned at once, not retried.
func TestUntilServedNamesASlowOpen(t *testing.T) {
	h := &Host{log: testLogger(t)}
	h.starting.Store(true)
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- h.untilServed(context.Background(), "tenants.a.bindings.b", func(context.Context) error {
			<-release
			return nil
		})
	}()
	eventually(t, "the hanging open listed as waiting", func() bool {
		w := h.waitingFor()
		return len(w) == 1 && strings.HasPrefix(w[0], "tenants.a.bindings.b: opening its queues: no answer")
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w := h.waitingFor(); len(w) != 0 {
		t.Errorf("still waiting after the open returned: %q", w)
	}
	calls := 0
	bad := errors.New("authorization violation")
	if err := h.untilServed(context.Background(), "k", func(context.Context) error { calls++; return bad }); !errors.Is(err, bad) || calls != 1 {
		t.Errorf("a permanent error: %v after %d calls; want it returned after 1", err, calls)
	}
}
