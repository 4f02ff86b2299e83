package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/testcache"
)

func testEngine(t testing.TB) *Engine {
	t.Helper()
	return engineLoggingTo(t, io.Discard)
}

// engineLoggingTo is testEngine with its log written to w.
func engineLoggingTo(t testing.TB, w io.Writer) *Engine {
	t.Helper()
	e, err := NewEngine(context.Background(), EngineConfig{
		CacheDir: testcache.Dir(t),
		Logger:   slog.New(slog.NewTextHandler(w, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

func load(t testing.TB, e *Engine, path string, abi ABI) *Module {
	t.Helper()
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(context.Background(), path, wasm, abi)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

const guestPath = "testdata/guest/guest.wasm"

func guestPool(t testing.TB, e *Engine, tenant string, cfg PoolConfig) *Pool {
	t.Helper()
	ten, err := e.Tenant(tenant, TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OutputQueue == "" {
		cfg.OutputQueue = "out"
	}
	p, err := ten.NewPool(context.Background(), load(t, e, guestPath, ABIWqhostV1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func TestRoundTripWqhost(t *testing.T) {
	e := testEngine(t)
	p := guestPool(t, e, "t1", PoolConfig{Binding: "b", MinInstances: 1, MaxOutputBytes: 2 << 20})
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for _, body := range [][]byte{{}, {'x'}, big} {
		out, err := p.Call(context.Background(), &Input{ID: "m", Body: body})
		if err != nil {
			t.Fatalf("%d bytes: %v", len(body), err)
		}
		if out.Verdict != VerdictOK || len(out.Outputs) != 1 || !bytes.Equal(out.Outputs[0].Body, body) || out.Outputs[0].Queue != "out" {
			t.Fatalf("%d bytes: got %+v", len(body), out)
		}
	}
}

func TestMetadataAndConfig(t *testing.T) {
	e := testEngine(t)
	p := guestPool(t, e, "acme", PoolConfig{Binding: "orders", Config: map[string]string{"greeting": "hello"}})
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	out, err := p.Call(context.Background(), &Input{ID: "m-1", Queue: "in", Body: []byte("meta"), DequeueCount: 3, InsertedAt: at, OrderKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	want := "id=m-1\nqueue=in\ntenant=acme\nbinding=orders\ndequeue_count=3\ninserted_at=2026-01-02T03:04:05.000000006Z\norder_key=k\nnope=<none>\n"
	if got := string(out.Outputs[0].Body); got != want {
		t.Fatalf("meta:\n%s\nwant\n%s", got, want)
	}
	for key, want := range map[string]string{"greeting": "hello", "missing": "<none>"} {
		out, err := p.Call(context.Background(), &Input{ID: "m-2", Body: []byte("config:" + key)})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(out.Outputs[0].Body); got != want {
			t.Errorf("config %s = %q, want %q", key, got, want)
		}
	}
}

func TestStatusesAndOutputs(t *testing.T) {
	e := testEngine(t)
	deny := func(q string) error {
		if strings.HasPrefix(q, "other") {
			return errors.New("not yours")
		}
		if strings.HasPrefix(q, "malformed") {
			return fmt.Errorf("no such name: %w", ErrInvalidName)
		}
		return nil
	}
	p := guestPool(t, e, "t", PoolConfig{Binding: "b", AllowEmit: deny, MaxOutputs: 5})
	tests := []struct {
		body      string
		status    Verdict
		retry     time.Duration
		errText   string
		outputs   int
		wantError error
	}{
		{body: "status:0", status: VerdictOK},
		{body: "retry:1500", status: VerdictRetry, retry: 1500 * time.Millisecond, errText: "try later"},
		// retry_after(i64 max) used to overflow into a negative delay ("retry at once").
		{body: "retry:9223372036854775807", status: VerdictRetry, retry: time.Duration(math.MaxInt64/time.Millisecond) * time.Millisecond, errText: "try later"},
		{body: "reject:bad input", status: VerdictReject, errText: "bad input"},
		{body: "status:7", wantError: ErrBadStatus},
		{body: "multi:3", status: VerdictOK, outputs: 3},
		{body: "multi:6", status: VerdictReject, errText: "emit=-4"},
		{body: "emitto:mine", status: VerdictOK, outputs: 1},
		{body: "emitto:other-tenant", status: VerdictReject, errText: "emit=-2"},
		{body: "emitto:bad/name", status: VerdictReject, errText: "emit=-5"},
		// AllowEmit's ErrInvalidName is ERR_INVALID, any other refusal ERR_DENIED.
		{body: "emitto:malformed", status: VerdictReject, errText: "emit=-5"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			out, err := p.Call(context.Background(), &Input{ID: "m", Body: []byte(tt.body)})
			if tt.wantError != nil {
				if !errors.Is(err, tt.wantError) {
					t.Fatalf("err = %v, want %v", err, tt.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Verdict != tt.status || out.RetryAfter != tt.retry || out.ErrorText != tt.errText || len(out.Outputs) != tt.outputs {
				t.Fatalf("got %+v", out)
			}
			for i, o := range out.Outputs {
				if tt.outputs > 1 && (o.Queue != fmt.Sprintf("q%d", i) || string(o.Body) != fmt.Sprint(i)) {
					t.Errorf("output %d = %s %q", i, o.Queue, o.Body)
				}
			}
		})
	}
}

// TestOutputTotalCap: the outputs of one message together are capped by
// MaxOutputTotalBytes (one 3-byte message could emit 64 × 1 MiB): the emit past the cap gets
// ERR_TOO_LARGE.
func TestOutputTotalCap(t *testing.T) {
	e := testEngine(t)
	p := guestPool(t, e, "t", PoolConfig{Binding: "b", MaxOutputTotalBytes: 3})
	if out, err := p.Call(context.Background(), &Input{ID: "m", Body: []byte("multi:3")}); err != nil || out.Verdict != VerdictOK || len(out.Outputs) != 3 {
		t.Fatalf("3 one-byte outputs under a 3-byte cap: %+v, %v", out, err)
	}
	out, err := p.Call(context.Background(), &Input{ID: "m", Body: []byte("multi:4")})
	if err != nil || out.Verdict != VerdictReject || out.ErrorText != "emit=-3" {
		t.Fatalf("4 one-byte outputs under a 3-byte cap: %+v, %v; want the 4th emit refused with -3", out, err)
	}
}

func TestFailuresReplaceInstance(t *testing.T) {
	e := testEngine(t)
	short := guestPool(t, e, "t", PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 1, Timeout: 2 * time.Second})
	// The memory bomb gets a time limit no loaded machine reaches, so only the memory limit
	// can stop it: with 2s, a slow race-instrumented run hit the time limit first.
	long := guestPool(t, e, "t", PoolConfig{Binding: "bomb", MinInstances: 1, MaxInstances: 1, Timeout: 5 * time.Minute})
	tests := []struct {
		body     string
		pool     *Pool
		want     error
		contains string
		maxTime  time.Duration
	}{
		{body: "trap", pool: short, want: ErrTrap},
		{body: "oob", pool: short, want: ErrTrap, contains: "wqhost.msg_body"},
		{body: "loop", pool: short, want: ErrTimeout, maxTime: 4 * time.Second},
		{body: "bomb", pool: long, want: ErrMemoryLimit},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			p := tt.pool
			before := p.Stats().Discarded
			start := time.Now()
			_, err := p.Call(context.Background(), &Input{ID: "bad", Body: []byte(tt.body)})
			took := time.Since(start)
			if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.contains) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.want, tt.contains)
			}
			if tt.maxTime > 0 && took > tt.maxTime {
				t.Errorf("took %s, want under %s", took, tt.maxTime)
			}
			if got := p.Stats().Discarded; got != before+1 {
				t.Errorf("discarded = %d, want %d", got, before+1)
			}
			out, err := p.Call(context.Background(), &Input{ID: "next", Body: []byte("fine")})
			if err != nil || string(out.Outputs[0].Body) != "fine" {
				t.Fatalf("next call: %v %+v", err, out)
			}
		})
	}
}

func TestMaxUsesAndMemoryThreshold(t *testing.T) {
	e := testEngine(t)
	p := guestPool(t, e, "t", PoolConfig{Binding: "b", MaxInstances: 1, MaxUses: 3})
	for i := range 7 {
		if _, err := p.Call(context.Background(), &Input{ID: fmt.Sprint(i), Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.Stats().Discarded; got != 2 {
		t.Errorf("max_uses 3 over 7 calls: discarded %d, want 2", got)
	}
	q := guestPool(t, e, "t", PoolConfig{Binding: "c", MaxInstances: 1, MaxMemoryBytes: 16 << 20})
	if _, err := q.Call(context.Background(), &Input{ID: "g", Body: []byte("grow:20")}); err != nil {
		t.Fatal(err)
	}
	if got := q.Stats().Discarded; got != 1 {
		t.Errorf("memory past threshold: discarded %d, want 1", got)
	}
}

// TestConcurrentCallsExclusive runs many goroutines through a small pool and checks that no
// instance ever serves two of them at once.
func TestConcurrentCallsExclusive(t *testing.T) {
	e := testEngine(t)
	p := guestPool(t, e, "t", PoolConfig{Binding: "b", MinInstances: 2, MaxInstances: 3, MaxUses: 5, Timeout: time.Second})
	var mu sync.Mutex
	inUse := map[*instance]bool{}
	errs := make(chan error, 400)
	p.trace = func(inst *instance, start bool) {
		mu.Lock()
		defer mu.Unlock()
		if start && inUse[inst] {
			errs <- errors.New("instance served two goroutines at once")
		}
		inUse[inst] = start
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				body := fmt.Sprintf("g%d-%d", g, i)
				if i == 5 && g%4 == 0 {
					body = "trap"
				}
				out, err := p.Call(context.Background(), &Input{ID: body, Body: []byte(body)})
				if body == "trap" {
					if !errors.Is(err, ErrTrap) {
						errs <- fmt.Errorf("trap: %v", err)
					}
					continue
				}
				if err != nil || string(out.Outputs[0].Body) != body {
					errs <- fmt.Errorf("%s: %v %+v", body, err, out)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := p.Stats(); s.Instances > 3 || s.Calls != 160 {
		t.Errorf("stats %+v", s)
	}
}

func TestTenantsDoNotShareInstances(t *testing.T) {
	e := testEngine(t)
	a := guestPool(t, e, "a", PoolConfig{Binding: "b", MinInstances: 2})
	b := guestPool(t, e, "b", PoolConfig{Binding: "b", MinInstances: 2})
	if a.rt == b.rt {
		t.Fatal("two tenants share a wazero runtime")
	}
	for _, p := range []*Pool{a, b} {
		for range 4 {
			out, err := p.Call(context.Background(), &Input{ID: "m", Body: []byte("meta")})
			if err != nil {
				t.Fatal(err)
			}
			if want := "tenant=" + p.t.name + "\n"; !strings.Contains(string(out.Outputs[0].Body), want) {
				t.Errorf("tenant %s got %s", p.t.name, out.Outputs[0].Body)
			}
		}
	}
}

func TestValidator(t *testing.T) {
	ctx := context.Background()
	c, err := newChecker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.rt.Close(ctx) })
	tests := []struct {
		path        string
		abi         ABI
		want        []string
		viaValidate bool
	}{
		{"testdata/badimport/badimport.wasm", ABIWqhostV1, []string{"testdata/badimport/badimport.wasm", "wqhost/v1", "wqhost.no_such_function"}, true},
		{"testdata/noexport/noexport.wasm", ABIWqhostV1, []string{"noexport.wasm", "wqhost/v1", "missing export wqhost_handle"}, true},
		{"testdata/stdio/stdio.wasm", ABIWqhostV1, []string{"exports _start", "missing export wqhost_abi_v1"}, false},
		{guestPath, ABIWasiStdio, []string{"wasi-stdio", "missing export _start", "imports wqhost.msg_body"}, false},
		{guestPath, ABIWqhostV1, nil, false},
		{"testdata/stdio/stdio.wasm", ABIWasiStdio, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.path+"/"+string(tt.abi), func(t *testing.T) {
			var err error
			if tt.viaValidate {
				err = Validate(ctx, tt.path, tt.abi)
			} else {
				wasm, rerr := os.ReadFile(tt.path)
				if rerr != nil {
					t.Fatal(rerr)
				}
				_, err = c.validate(ctx, tt.path, wasm, tt.abi)
			}
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCompileOncePerDigest(t *testing.T) {
	e := testEngine(t)
	wasm, err := os.ReadFile(guestPath)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	mods := make([]*Module, 8)
	for i := range mods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := e.Compile(context.Background(), fmt.Sprintf("copy%d", i), wasm, ABIWqhostV1)
			if err != nil {
				t.Error(err)
				return
			}
			mods[i] = m
		}()
	}
	wg.Wait()
	for _, m := range mods[1:] {
		if m == nil || m.c != mods[0].c {
			t.Fatal("same bytes compiled more than once")
		}
	}
}

func TestSelfTest(t *testing.T) {
	e := testEngine(t)
	ten, _ := e.Tenant("t", TenantLimits{})
	if err := ten.Validate(context.Background(), load(t, e, guestPath, ABIWqhostV1), PoolConfig{Binding: "b"}); err != nil {
		t.Fatal(err)
	}
}

func TestStdio(t *testing.T) {
	e := testEngine(t)
	ten, _ := e.Tenant("acme", TenantLimits{})
	p, err := ten.NewPool(context.Background(), load(t, e, "testdata/stdio/stdio.wasm", ABIWasiStdio),
		PoolConfig{Binding: "conv", OutputQueue: "out", Config: map[string]string{"my-key": "v"}, Timeout: 2 * time.Second, MaxOutputBytes: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	big := bytes.Repeat([]byte("abcdefgh"), 1<<17)
	for _, body := range [][]byte{{}, {'x'}, big} {
		out, err := p.Call(context.Background(), &Input{ID: "m", Body: body})
		if err != nil {
			t.Fatalf("%d bytes: %v", len(body), err)
		}
		if len(body) == 0 {
			if len(out.Outputs) != 0 {
				t.Errorf("empty stdout sent %d outputs", len(out.Outputs))
			}
			continue
		}
		if out.Verdict != VerdictOK || len(out.Outputs) != 1 || !bytes.Equal(out.Outputs[0].Body, body) {
			t.Fatalf("%d bytes: status %v, %d outputs", len(body), out.Verdict, len(out.Outputs))
		}
	}
	for _, tt := range []struct {
		body   string
		status Verdict
		err    error
	}{{"exit:75", VerdictRetry, nil}, {"exit:65", VerdictReject, nil}, {"exit:3", 0, ErrBadStatus}, {"loop", 0, ErrTimeout}} {
		out, err := p.Call(context.Background(), &Input{ID: "m", Body: []byte(tt.body)})
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("%s: err %v, want %v", tt.body, err, tt.err)
			}
			continue
		}
		if err != nil || out.Verdict != tt.status || out.ErrorText != "exiting with "+tt.body[5:] {
			t.Errorf("%s: %v %+v", tt.body, err, out)
		}
	}
	out, err := p.Call(context.Background(), &Input{ID: "m-9", Queue: "in", Body: []byte("env"), DequeueCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"WQHOST_MESSAGE_ID=m-9", "WQHOST_QUEUE=in", "WQHOST_TENANT=acme", "WQHOST_BINDING=conv", "WQHOST_DEQUEUE_COUNT=2", "WQHOST_CONFIG_MY_KEY=v"} {
		if !strings.Contains(string(out.Outputs[0].Body), w) {
			t.Errorf("env lacks %s:\n%s", w, out.Outputs[0].Body)
		}
	}
}

func TestGuestLogsReachSlog(t *testing.T) {
	var buf syncBuffer
	e := engineLoggingTo(t, &buf)
	p := guestPool(t, e, "acme", PoolConfig{Binding: "b"})
	if _, err := p.Call(context.Background(), &Input{ID: "m-7", Body: []byte("log:careful")}); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	for _, w := range []string{"level=WARN msg=careful", "tenant=acme", "binding=b", "message_id=m-7", "msg=stdout:careful"} {
		if !strings.Contains(got, w) {
			t.Errorf("log lacks %q:\n%s", w, got)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
