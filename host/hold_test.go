package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/internal/wasmtest"
	"github.com/wqhost/wqhost/runtime"
)

// loopingInitModule is a wqhost/v1 module whose _initialize loops for ever on WASI
// random_get, spending nearly all its time inside the host call.
func loopingInitModule() []byte {
	return wasmtest.ModuleImporting([]wasmtest.Import{wasmtest.RandomGet}, 1,
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(0)},
		wasmtest.Func{Export: "_initialize", Body: wasmtest.RandomGetLoop(8 << 10)},
	)
}

// TestStartBesideLoopingInitialize: a tenant whose module's _initialize loops in host calls
// does not hold up another tenant's binding, nor the admin API: the healthy binding is built
// while the other loops (/readyz says "starting: 1 of 2 bindings up"), and New ends within
// the start limit (StartTimeoutFloor) plus AbandonGrace with an error naming the looping
// binding and the time limit, closing what it built (a host never starts half-configured).
func TestStartBesideLoopingInitialize(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "loop-init.wasm")
	if err := os.WriteFile(bad, loopingInitModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf(`data_dir: %s
cache_dir: %s
admin: {addr: "127.0.0.1:0"}
tenants:
  a-bad:
    limits: {timeout: 100ms}
    bindings:
      loops: {queue: q, module: %q}
  b-good:
    bindings:
      steady: {queue: q, module: %q}
`, filepath.Join(dir, "data"), cacheDir, bad, abs(t, flakyWasm))
	cfg, err := config.Parse([]byte(y), dir)
	if err != nil {
		t.Fatal(err)
	}
	addr := make(chan net.Addr, 1)
	built := make(chan string, 2)
	type result struct {
		h   *Host
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		h, err := newWithHooks(context.Background(), cfg, testLogger(t), startHooks{
			served: func(a net.Addr) { addr <- a },
			built:  func(b *binding) { built <- b.tenant.name + "/" + b.name },
		})
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
	select {
	case name := <-built:
		if name != "b-good/steady" {
			t.Fatalf("built %s first; want the healthy b-good/steady", name)
		}
	case r := <-done:
		t.Fatalf("New returned before the healthy binding was built: %v", r.err)
	case <-time.After(time.Minute):
		t.Fatal("the healthy binding was not built within a minute beside the looping one")
	}
	var body struct {
		Status string `json:"status"`
	}
	resp, err := http.Get(base + "/readyz")
	if err == nil {
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
	}
	// On a loaded machine New may finish (the looping start timed out) and stop serving
	// between the healthy binding's build and this read, which then finds no server.
	if err != nil {
		select {
		case r := <-done:
			t.Logf("New returned before /readyz was read (%v; read: %v); its progress was not observed", r.err, err)
			done <- r
		case <-time.After(time.Minute):
			t.Fatalf("/readyz while New builds: %v, and New did not return within a minute", err)
		}
	}
	select {
	case r := <-done:
		if err == nil {
			t.Logf("New returned before /readyz was read (%v); its progress was not observed", r.err)
		}
		done <- r
	default:
		if resp.StatusCode != http.StatusServiceUnavailable || body.Status != "starting: 1 of 2 bindings up" {
			t.Errorf("/readyz while one binding loops = %d %q, want 503 starting: 1 of 2 bindings up", resp.StatusCode, body.Status)
		}
	}
	bound := runtime.StartTimeoutFloor + runtime.AbandonGrace
	select {
	case r := <-done:
		took := time.Since(start)
		t.Logf("New returned after %s (start limit %s, grace %s): %v", took.Round(time.Millisecond), runtime.StartTimeoutFloor, runtime.AbandonGrace, r.err)
		if r.h != nil {
			_ = r.h.Close(context.Background())
			t.Fatal("New started a host with a binding whose module never finished starting")
		}
		if !errors.Is(r.err, runtime.ErrTimeout) || !strings.Contains(r.err.Error(), "tenants.a-bad.bindings.loops") ||
			!strings.Contains(r.err.Error(), "start function") {
			t.Errorf("New: %v; want a start-function time-limit error naming tenants.a-bad.bindings.loops", r.err)
		}
	case <-time.After(bound + time.Minute): // far above the bound: only a hang gets here
		t.Fatalf("New still building %s after a looping _initialize began (bound %s)", bound+time.Minute, bound)
	}
}

// TestReloadSlowModuleHoldsOnlyItsBinding: a reload whose new module for one binding takes
// its whole start limit (a looping _initialize) swaps another binding's new module in
// meanwhile, before the slow one has failed, instead of after it; the slow one fails with a
// time-limit error and keeps its previous version serving.
func TestReloadSlowModuleHoldsOnlyItsBinding(t *testing.T) {
	slow := filepath.Join(t.TempDir(), "slow.wasm")
	if err := os.WriteFile(slow, readFixture(t, "v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a-slow comes first in the bindings' order: a serial reload would build it first.
	h, dir := reloadHost(t, fmt.Sprintf(`
  default:
    limits: {timeout: 1s}
    bindings:
      a-slow: {backend: mem, queue: a, module: %q}
      b-fast: {backend: mem, queue: b, module: handler.wasm}
`, slow))
	defer h.Close(context.Background())
	if err := os.WriteFile(slow, loopingInitModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "handler.wasm"), readFixture(t, "v2"), 0o644); err != nil {
		t.Fatal(err)
	}
	v2 := digestOf(readFixture(t, "v2"))
	named := func(name string) *binding {
		for _, b := range h.bindings() {
			if b.name == name {
				return b
			}
		}
		t.Fatalf("no binding %s", name)
		return nil
	}
	fast, slowB := named("b-fast"), named("a-slow")
	slowFailed := func() bool {
		slowB.mu.Lock()
		defer slowB.mu.Unlock()
		return slowB.lastErr != ""
	}
	type result struct {
		res ReloadResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := h.ReloadAll(context.Background())
		done <- result{res, err}
	}()
	swappedFirst := false
	deadline := time.After(time.Minute) // far above the start limit: only a hang gets here
	for !swappedFirst {
		if fast.cur.Load().module.Digest() == v2 {
			if slowFailed() {
				t.Fatal("b-fast swapped only once a-slow's reload had failed: the slow module held it up")
			}
			swappedFirst = true
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the reload ended before b-fast swapped to v2: %+v, %v", r.res, r.err)
		case <-deadline:
			t.Fatal("b-fast not swapped to v2 within a minute")
		case <-time.After(10 * time.Millisecond):
		}
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(runtime.StartTimeoutFloor + runtime.AbandonGrace + time.Minute):
		t.Fatal("the reload of the looping module never ended")
	}
	if !errors.Is(r.err, runtime.ErrTimeout) && (r.err == nil || !strings.Contains(r.err.Error(), "time limit")) {
		t.Errorf("reload error = %v; want a time-limit error for a-slow", r.err)
	}
	for _, br := range r.res.Bindings {
		want := map[string]string{"a-slow": ReloadFailed, "b-fast": ReloadSwapped}[br.Binding]
		if br.Result != want {
			t.Errorf("%s: %s (%s), want %s", br.Binding, br.Result, br.Error, want)
		}
	}
}
