package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// randomBytes is what each random_get of randomLoopModule asks for: enough that, before host
// calls were charged, the guest ran about five seconds between two fuel checks (a loop round
// was charged a fraction of a unit whatever the call did: 1 MiB ran five minutes), far past
// the 100 ms limit plus AbandonGrace, yet it stops by itself soon after and does not burn
// CPU for the rest of the package's tests.
const randomBytes = 8 << 10

// randomLoopModule is a wqhost/v1 module whose _initialize (or, with selfTest, whose
// wqhost_self_test instead) loops for ever on WASI random_get of randomBytes: nearly all its
// time is spent inside the host call, where no fuel check runs.
func randomLoopModule(selfTest bool) []byte {
	loop := wasmtest.RandomGetLoop(randomBytes)
	fs := []wasmtest.Func{
		{Export: "wqhost_abi_v1"},
		{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(0)},
	}
	if selfTest {
		fs = append(fs, wasmtest.Func{Export: "wqhost_self_test", Results: []byte{wasmtest.I32}, Body: concat(loop, wasmtest.I32Const(0))})
	} else {
		fs = append(fs, wasmtest.Func{Export: "_initialize", Body: loop})
	}
	return wasmtest.ModuleImporting([]wasmtest.Import{wasmtest.RandomGet}, 1, fs...)
}

// TestStartInHostCallsBounded: a start function or self test that spends its time inside
// host calls returns to the host within its limit plus AbandonGrace, by NewPool, Validate
// and Validate's self test, with a time-limit error naming what it was, whether the guest
// noticed the limit (host calls charged) or was abandoned still running.
func TestStartInHostCallsBounded(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("t-random", TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Abandoned guests stop at their next fuel check; the engine closes after them.
		deadline := time.Now().Add(2 * time.Minute)
		for ten.Stuck() > 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := ten.Stuck(); n > 0 {
			t.Errorf("%d abandoned guests still running 2 minutes on", n)
		}
	})
	ctx := context.Background()
	initLoop, err := e.Compile(ctx, "init-random.wasm", randomLoopModule(false), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	testLoop, err := e.Compile(ctx, "selftest-random.wasm", randomLoopModule(true), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 100 * time.Millisecond
	cfg := PoolConfig{Binding: "b", Timeout: limit, StartTimeout: limit}
	cases := []struct {
		name, want string
		run        func(ctx context.Context) error
	}{
		{"NewPool", "start function", func(ctx context.Context) error {
			c := cfg
			c.MinInstances = 1
			p, err := ten.NewPool(ctx, initLoop, c)
			if err == nil {
				_ = p.Close(ctx)
			}
			return err
		}},
		{"Validate", "start function", func(ctx context.Context) error { return ten.Validate(ctx, initLoop, cfg) }},
		{"SelfTest", "wqhost_self_test", func(ctx context.Context) error { return ten.Validate(ctx, testLoop, cfg) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- tc.run(ctx) }()
			select {
			case err := <-done:
				t.Logf("returned after %s: %v", time.Since(start).Round(time.Millisecond), err)
				if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v; want a time-limit error naming the %s", err, tc.want)
				}
			case <-time.After(time.Minute): // far above limit + grace: only a hang gets here
				t.Fatalf("%s stuck in host calls held its caller for a minute (limit %s, grace %s)", tc.want, limit, AbandonGrace)
			}
		})
	}
}

// TestBoundedAbandons: guest code that ignores every limit (blocked where nothing reaches
// it) is abandoned once its context ended and AbandonGrace passed: the caller gets
// ErrAbandoned (and ErrTimeout for a deadline) at once, the pool counts it stuck and keeps
// its compiled code, and what it made is released by its own goroutine when it returns.
func TestBoundedAbandons(t *testing.T) {
	e := testEngine(t)
	m := load(t, e, "testdata/guest/guest.wasm", ABIWqhostV1)
	ten, err := e.Tenant("t-bounded", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b"})
	if err != nil {
		t.Fatal(err)
	}
	release, lateRan := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = p.bounded(ctx, "stuck thing", func() error { <-release; return nil }, func() { close(lateRan) })
	took := time.Since(start)
	if !errors.Is(err, ErrAbandoned) || !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "stuck thing") {
		t.Fatalf("err = %v; want ErrAbandoned and ErrTimeout naming it", err)
	}
	if took < AbandonGrace {
		t.Errorf("gave up after %s, before the grace %s", took, AbandonGrace)
	}
	if p.Stuck() != 1 {
		t.Errorf("Stuck() = %d, want 1", p.Stuck())
	}
	if err := p.Close(context.Background()); err == nil || !strings.Contains(err.Error(), "abandoned") {
		t.Errorf("Close with abandoned code running = %v; want an error saying its code stays", err)
	}
	close(release)
	select {
	case <-lateRan:
	case <-time.After(time.Minute):
		t.Fatal("the abandoned code returned but its clean-up never ran")
	}
	waitFor(t, "the stuck count back to 0", func() bool { return p.Stuck() == 0 })

	// Code that returns within the grace is waited for, its error returned.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	want := errors.New("stopped")
	if err := p.bounded(ctx2, "slow", func() error { <-ctx2.Done(); return want }, nil); err != want {
		t.Errorf("code returning within the grace: err = %v, want %v", err, want)
	}
}
