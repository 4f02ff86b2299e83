package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStartFunctionNeverReturns: a module whose start function loops for ever is refused
// within the pool's time limit, by NewPool (warm instances), Call (a fresh instance) and
// Validate (hot reload), instead of hanging the host that loads it.
func TestStartFunctionNeverReturns(t *testing.T) {
	e := testEngine(t)
	m := load(t, e, "testdata/hang/hang.wasm", ABIWqhostV1)
	ten, err := e.Tenant("t-hang", TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 300 * time.Millisecond
	cases := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"NewPool", func(ctx context.Context) error {
			p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", MinInstances: 1, Timeout: limit, StartTimeout: limit})
			if err == nil {
				_ = p.Close(ctx)
			}
			return err
		}},
		{"Call", func(ctx context.Context) error {
			p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: limit, StartTimeout: limit})
			if err != nil {
				return err
			}
			defer p.Close(ctx)
			_, err = p.Call(ctx, &Input{ID: "m1"})
			return err
		}},
		{"Validate", func(ctx context.Context) error {
			return ten.Validate(ctx, m, PoolConfig{Binding: "b", Timeout: limit, StartTimeout: limit})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { done <- tc.run(context.Background()) }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "start function") || !strings.Contains(err.Error(), "hang.wasm") {
					t.Fatalf("err = %v; want a start-function time-limit error naming the module", err)
				}
			case <-time.After(time.Minute): // far above the limit: only a hang gets here
				t.Fatal("loading a module whose start function never returns hung")
			}
		})
	}
}

// TestStartFunctionGetsTheFloor: a call time limit far below what a Go guest's runtime needs
// to start does not stop the start function (it gets StartTimeoutFloor), so a tight handler
// limit on a loaded machine does not turn into failed instantiations; the hanging start
// function is still stopped, at the floor.
func TestStartFunctionGetsTheFloor(t *testing.T) {
	e := testEngine(t)
	m := load(t, e, "testdata/guest/guest.wasm", ABIWqhostV1)
	ten, err := e.Tenant("t-floor", TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MinInstances: 1, Timeout: time.Microsecond})
	if err != nil {
		t.Fatalf("a 1µs call limit stopped the Go guest's start function: %v", err)
	}
	_ = p.Close(context.Background())
	if got := (PoolConfig{Timeout: time.Microsecond}).startTimeout(); got != StartTimeoutFloor {
		t.Errorf("start limit for a 1µs call limit = %s, want the floor %s", got, StartTimeoutFloor)
	}
	if got := (PoolConfig{Timeout: time.Minute}).startTimeout(); got != time.Minute {
		t.Errorf("start limit for a 1m call limit = %s, want 1m", got)
	}
	if got := (PoolConfig{}).startTimeout(); got != 0 {
		t.Errorf("start limit without a call limit = %s, want none", got)
	}
}
