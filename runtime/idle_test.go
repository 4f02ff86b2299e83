package runtime

import (
	"context"
	"testing"
	"time"
)

// waitFor polls cond until it holds or a minute passes (far above any idle timeout here:
// only a janitor that never acts gets there).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestIdlePoolScalesToZero: a pool without min_instances closes its instance once it has
// been idle for IdleTimeout, and its next call instantiates one on demand; a pool with
// MinInstances keeps that many through many idle timeouts.
func TestIdlePoolScalesToZero(t *testing.T) {
	const idle = 50 * time.Millisecond
	e := testEngine(t)
	for _, tt := range []struct {
		name string
		min  int
	}{
		{"to zero", 0},
		{"keeps min_instances", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := guestPool(t, e, "t-"+tt.name, PoolConfig{Binding: "b", MinInstances: tt.min, MaxInstances: 2, Timeout: 10 * time.Second, IdleTimeout: idle})
			for i := range 2 {
				out, err := p.Call(context.Background(), &Input{ID: "m", Body: []byte("hello")})
				if err != nil || string(out.Outputs[0].Body) != "hello" {
					t.Fatalf("call %d: %v %+v", i, err, out)
				}
				if n := p.Stats().Instances; n != 1 {
					t.Fatalf("call %d: %d instances after a call, want 1", i, n)
				}
				if tt.min == 0 {
					waitFor(t, "the idle instance to close", func() bool { return p.Stats().Instances == 0 })
					continue
				}
				// Three idle timeouts by the janitor's own clock: the instance was due thrice.
				since := e.idle.now.Load()
				waitFor(t, "three idle timeouts", func() bool { return e.idle.now.Load()-since > int64(3*idle) })
				if n := p.Stats().Instances; n != tt.min {
					t.Fatalf("%d instances after three idle timeouts, want min_instances %d", n, tt.min)
				}
			}
		})
	}
}

// TestJanitorEndsWithItsPools: the janitor runs only while a pool with an idle timeout is open.
func TestJanitorEndsWithItsPools(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("t", TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), load(t, e, guestPath, ABIWqhostV1), PoolConfig{Binding: "b", MaxInstances: 1, IdleTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	running := func() bool {
		e.idle.mu.Lock()
		defer e.idle.mu.Unlock()
		return e.idle.running
	}
	if !running() {
		t.Fatal("no janitor for a pool with an idle timeout")
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the janitor to end", func() bool { return !running() })
}
