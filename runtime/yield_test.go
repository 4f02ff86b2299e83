package runtime

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestTimeLimitStopsEveryLanguage: an endless loop, an endless recursion and an hour's sleep
// (Go and TinyGo; the Rust fixture has no sleep) in a guest built
// by each supported toolchain end at the pool's default-style time limit through the fuel
// counter (not the close-on-context-done fallback), and the pool serves the next message.
func TestTimeLimitStopsEveryLanguage(t *testing.T) {
	e := testEngine(t)
	for _, lang := range []struct{ name, path string }{
		{"go", "testdata/spin/spin-go.wasm"},
		{"tinygo", "testdata/spin/spin-tinygo.wasm"},
		{"rust", "testdata/spinrust/spinrust.wasm"},
	} {
		t.Run(lang.name, func(t *testing.T) {
			ten, err := e.Tenant("t-"+lang.name, TenantLimits{MemoryPages: 256})
			if err != nil {
				t.Fatal(err)
			}
			m := load(t, e, lang.path, ABIWqhostV1)
			if m.c.fuel == nil {
				t.Fatalf("%s was not instrumented with a fuel counter", lang.path)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 1, Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			if !p.v.fuel || p.v.terminate {
				t.Fatalf("pool variant = %+v, want fuel without close-on-context-done", p.v)
			}
			for _, body := range []string{"loop", "recurse", "sleep"} {
				if body == "sleep" && lang.name == "rust" {
					continue // wasm32-unknown-unknown: no WASI, no sleep
				}
				done := make(chan error, 1)
				go func() {
					_, err := p.Call(context.Background(), &Input{ID: body, Body: []byte(body)})
					done <- err
				}()
				select {
				case err := <-done:
					if body != "recurse" && !errors.Is(err, ErrTimeout) {
						t.Fatalf("%s: err = %v, want the time limit", body, err)
					}
					if err == nil {
						t.Fatalf("%s: call returned no error", body)
					}
				case <-time.After(time.Minute): // far above the limit: only a guest never stopped gets here
					t.Fatalf("%s: the time limit did not stop the guest", body)
				}
				if _, err := p.Call(context.Background(), &Input{ID: "ok", Body: []byte("x")}); err != nil {
					t.Fatalf("call after %s: %v", body, err)
				}
			}
		})
	}
}

// TestSpinningGuestsCannotStarveTheHost: more guests spinning at once than GOMAXPROCS. Compiled
// guest code cannot be preempted, so if the time limit needed a goroutine to run (a timer
// setting a flag), no P would be free to run it and the host would hang for good. The
// guests' yields give the scheduler its turns: a ticking goroutine keeps ticking while they
// spin, and every call ends at the time limit.
func TestSpinningGuestsCannotStarveTheHost(t *testing.T) {
	e := testEngine(t)
	n := goruntime.GOMAXPROCS(0) + 2
	ten, err := e.Tenant("t", TenantLimits{MemoryPages: 256})
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, e, "testdata/spin/spin-tinygo.wasm", ABIWqhostV1)
	const limit = 2 * time.Second
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MinInstances: n, MaxInstances: n, Timeout: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	var ticks atomic.Int64
	stopTicking := make(chan struct{})
	defer close(stopTicking)
	go func() {
		for {
			select {
			case <-stopTicking:
				return
			case <-time.After(time.Millisecond):
				ticks.Add(1)
			}
		}
	}()
	done := make(chan error, n)
	for i := range n {
		go func() {
			_, err := p.Call(context.Background(), &Input{ID: fmt.Sprint("spin-", i), Body: []byte("loop")})
			done <- err
		}()
	}
	// Wait for the guests to be running before counting ticks.
	deadline := time.After(time.Minute) // far above the limit: only a starved host gets here
	for p.Stats().Calls < int64(n) {
		select {
		case <-deadline:
			t.Fatalf("only %d of %d calls started", p.Stats().Calls, n)
		case <-time.After(time.Millisecond):
		}
	}
	before := ticks.Load()
	for range n {
		select {
		case err := <-done:
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want the time limit", err)
			}
		case <-deadline:
			t.Fatal("spinning guests did not end: the host is starved")
		}
	}
	if got := ticks.Load() - before; got < 10 {
		t.Errorf("a ticking goroutine ticked %d times while %d guests spun for %s on %d Ps", got, n, limit, goruntime.GOMAXPROCS(0))
	}
}
