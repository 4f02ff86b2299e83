package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/runtime"
)

// bindingsYAML is a tenants section of tenants × per bindings of the flaky fixture, named
// t<i> and b<j>, each on its own queue.
func bindingsYAML(t testing.TB, tenants, per int) string {
	var y strings.Builder
	mod := abs(t, flakyWasm)
	for i := range tenants {
		fmt.Fprintf(&y, "  t%d:\n    bindings:\n", i)
		for j := range per {
			fmt.Fprintf(&y, "      b%d: {queue: q%d, module: %q}\n", j, j, mod)
		}
	}
	return y.String()
}

// TestReadyzReportsStartProgress: while New builds the bindings, the admin API already
// answers: /readyz is 503 saying "starting: K of N bindings up", /v1/status carries the
// same counts and a reload is refused; once built, /readyz is 200 "ready: N bindings". The
// start is held after two bindings by a hook, so K is known without timing.
func TestReadyzReportsStartProgress(t *testing.T) {
	dir := t.TempDir()
	y := fmt.Sprintf("data_dir: %s\ncache_dir: %s\nadmin: {addr: \"127.0.0.1:0\"}\ntenants:\n%s",
		filepath.Join(dir, "data"), cacheDir, bindingsYAML(t, 1, 5))
	cfg, err := config.Parse([]byte(y), dir)
	if err != nil {
		t.Fatal(err)
	}
	addr := make(chan net.Addr, 1)
	release := make(chan struct{})
	var released atomic.Bool
	defer func() {
		if released.CompareAndSwap(false, true) {
			close(release)
		}
	}()
	type result struct {
		h   *Host
		err error
	}
	done := make(chan result, 1)
	go func() {
		h, err := newWithHooks(context.Background(), cfg, testLogger(t), startHooks{
			served: func(a net.Addr) { addr <- a },
			building: func(i int) {
				if i >= 2 {
					<-release // bindings 2..4 wait until the test has looked
				}
			},
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

	var body struct {
		Status        string `json:"status"`
		BindingsUp    int    `json:"bindings_up"`
		BindingsTotal int    `json:"bindings_total"`
	}
	eventually(t, "two of five bindings up", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("/readyz during the start = %d, want 503", resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return body.BindingsUp == 2
	})
	if body.Status != "starting: 2 of 5 bindings up" || body.BindingsTotal != 5 {
		t.Errorf("/readyz during the start = %+v, want starting: 2 of 5 bindings up", body)
	}
	var st Status
	if err := json.Unmarshal([]byte(get(t, base+"/v1/status", "", 200)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Ready || st.BindingsUp != 2 || st.BindingsTotal != 5 {
		t.Errorf("/v1/status during the start: ready %v, bindings %d of %d; want not ready, 2 of 5", st.Ready, st.BindingsUp, st.BindingsTotal)
	}
	if out := do(t, http.MethodPost, base+"/v1/reload", "", "", http.StatusUnprocessableEntity); !strings.Contains(out, "still starting (2 of 5 bindings up)") {
		t.Errorf("reload during the start: %s", out)
	}

	released.Store(true)
	close(release)
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("New did not return within a minute of the release")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer func() { _ = r.h.Close(context.Background()) }()
	if out := get(t, base+"/readyz", "", 200); !strings.Contains(out, `"status": "ready: 5 bindings"`) || !strings.Contains(out, `"bindings_up": 5`) {
		t.Errorf("/readyz once started: %s", out)
	}
	if st := r.h.Status(context.Background()); !st.Ready || st.BindingsUp != 5 || st.BindingsTotal != 5 {
		t.Errorf("status once started: ready %v, bindings %d of %d", st.Ready, st.BindingsUp, st.BindingsTotal)
	}
	if err := r.h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/readyz"); err == nil {
		t.Errorf("the admin API still answers after Close")
	}
}

// TestBindingsStartConcurrentlyInConfigOrder: New builds bindings several at once, yet the
// host's bindings keep the config's order (tenant, then name), and a module shared by all
// compiles to one digest.
func TestBindingsStartConcurrentlyInConfigOrder(t *testing.T) {
	h, _ := newHost(t, bindingsYAML(t, 3, 4))
	defer func() { _ = h.Close(context.Background()) }()
	var got []string
	digests := map[string]bool{}
	for _, ts := range h.Status(context.Background()).Tenants {
		for _, bs := range ts.Bindings {
			got = append(got, ts.Name+"/"+bs.Name)
			digests[bs.ModuleDigest] = true
		}
	}
	want := "t0/b0 t0/b1 t0/b2 t0/b3 t1/b0 t1/b1 t1/b2 t1/b3 t2/b0 t2/b1 t2/b2 t2/b3"
	if strings.Join(got, " ") != want {
		t.Errorf("bindings %v, want %s", got, want)
	}
	if len(digests) != 1 {
		t.Errorf("one module, %d digests", len(digests))
	}
}

// TestBindingsFailingStartNamedAndClosed: bindings that fail to build are each named in
// New's error, in config order, and every binding built alongside them is closed: its pool
// refuses calls afterwards.
func TestBindingsFailingStartNamedAndClosed(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.wasm")
	if err := os.WriteFile(bad, []byte("not a wasm module"), 0o644); err != nil {
		t.Fatal(err)
	}
	var y strings.Builder
	fmt.Fprintf(&y, "data_dir: %s\ncache_dir: %s\nadmin: {addr: \"off\"}\ntenants:\n  acme:\n    bindings:\n", filepath.Join(dir, "data"), cacheDir)
	for i := range 8 {
		mod := abs(t, flakyWasm)
		if i == 3 || i == 6 {
			mod = bad
		}
		fmt.Fprintf(&y, "      b%d: {queue: q%d, module: %q}\n", i, i, mod)
	}
	cfg, err := config.Parse([]byte(y.String()), dir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var built []*binding
	h, err := newWithHooks(context.Background(), cfg, testLogger(t), startHooks{built: func(b *binding) {
		mu.Lock()
		defer mu.Unlock()
		built = append(built, b)
	}})
	if err == nil {
		_ = h.Close(context.Background())
		t.Fatal("New succeeded with two bad modules")
	}
	msg := err.Error()
	i3, i6 := strings.Index(msg, "tenants.acme.bindings.b3:"), strings.Index(msg, "tenants.acme.bindings.b6:")
	if i3 < 0 || i6 < 0 || i3 > i6 {
		t.Errorf("error should name b3 then b6: %v", err)
	}
	for _, other := range []string{"b0:", "b5:", "b7:"} {
		if strings.Contains(msg, "tenants.acme.bindings."+other) {
			t.Errorf("error names a good binding (%s): %v", other, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(built) != 6 {
		t.Errorf("%d bindings built, want the 6 good ones", len(built))
	}
	for _, b := range built {
		if _, err := b.cur.Load().pool.Call(context.Background(), &runtime.Input{Queue: "q", Body: []byte("x")}); !errors.Is(err, runtime.ErrPoolClosed) {
			t.Errorf("binding %s after the failed start: call error %v, want %v", b.name, err, runtime.ErrPoolClosed)
		}
	}
}

// TestStatusPaging: /v1/status?tenant=&limit=&offset= returns the page asked for, in
// (tenant, binding) order, with the total; bad values are 400, an unknown tenant 404.
func TestStatusPaging(t *testing.T) {
	h, _ := newHost(t, bindingsYAML(t, 2, 3))
	defer func() { _ = h.Close(context.Background()) }()
	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()
	for _, tc := range []struct {
		query     string
		bindings  string // tenant/binding in order
		total     int
		bindingsN int // bindings_total (the host's)
	}{
		{"", "t0/b0 t0/b1 t0/b2 t1/b0 t1/b1 t1/b2", 6, 6},
		{"?tenant=t1", "t1/b0 t1/b1 t1/b2", 3, 6},
		{"?limit=2", "t0/b0 t0/b1", 6, 6},
		{"?limit=2&offset=2", "t0/b2 t1/b0", 6, 6},
		{"?limit=4&offset=4", "t1/b1 t1/b2", 6, 6},
		{"?offset=9", "", 6, 6},
		{"?tenant=t0&limit=1&offset=1", "t0/b1", 3, 6},
	} {
		var st Status
		if err := json.Unmarshal([]byte(get(t, srv.URL+"/v1/status"+tc.query, "", 200)), &st); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ts := range st.Tenants {
			for _, bs := range ts.Bindings {
				got = append(got, ts.Name+"/"+bs.Name)
			}
		}
		if strings.Join(got, " ") != tc.bindings || st.Page.Total != tc.total || st.Page.Returned != len(got) || st.BindingsTotal != tc.bindingsN {
			t.Errorf("status%s: bindings %v, page %+v, bindings_total %d; want %q, total %d, bindings_total %d",
				tc.query, got, st.Page, st.BindingsTotal, tc.bindings, tc.total, tc.bindingsN)
		}
	}
	for _, tc := range []struct {
		query string
		code  int
	}{
		{"?limit=-1", 400}, {"?limit=x", 400}, {"?offset=-3", 400}, {"?limit=1000000000", 400}, {"?tenant=nobody", 404},
	} {
		get(t, srv.URL+"/v1/status"+tc.query, "", tc.code)
	}
}

// TestNewChecksModuleFiles: a config a library user built with config.Parse (no file
// checks) and whose modules are missing is refused by New with every missing one named by
// its key, before anything is built, as the command line's loader reports them.
func TestNewChecksModuleFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := hostConfig(t, "", fmt.Sprintf("  acme:\n    bindings:\n      a: {queue: qa, module: %q}\n      b: {queue: qb, module: %q}\n",
		filepath.Join(dir, "gone-a.wasm"), filepath.Join(dir, "gone-b.wasm")))
	h, err := New(context.Background(), cfg, testLogger(t))
	if err == nil {
		_ = h.Close(context.Background())
		t.Fatal("New accepted missing modules")
	}
	var ce *config.Error
	if !errors.As(err, &ce) || len(ce.Problems) != 2 ||
		!strings.HasPrefix(ce.Problems[0].Error(), "tenants.acme.bindings.a.module: ") ||
		!strings.HasPrefix(ce.Problems[1].Error(), "tenants.acme.bindings.b.module: ") {
		t.Fatalf("New: %v; want a config.Error naming both bindings' module keys", err)
	}
}
