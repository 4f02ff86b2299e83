package runtime

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// startPasses is how many loop passes the test modules' _initialize runs: a known amount of
// start fuel (each pass is charged at least one unit), far above a handler's.
const startPasses = 1 << 20

// startLoopModule is a wqhost/v1 module whose _initialize counts to startPasses (then traps
// when trapStart) and whose handler returns 0 at once.
func startLoopModule(trapStart bool) []byte {
	init := wasmtest.CountTo(0, startPasses)
	if trapStart {
		init = append(init, 0x00) // unreachable
	}
	return wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "_initialize", Body: init},
		wasmtest.Handle(wasmtest.I32Const(0)),
	)
}

// warmCharges collects what PoolConfig.OnWarmStart is told.
type warmCharges struct {
	mu sync.Mutex
	us []Usage
}

func (w *warmCharges) add(u Usage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.us = append(w.us, u)
}

func (w *warmCharges) get() []Usage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Usage(nil), w.us...)
}

// startFuelOK reports whether f is what startPasses passes cost: about a unit a pass (an
// unrolled loop charges each pass its check's charge), within an allowance: a loop keeping
// its fuel in a local stores it back only when it yields or returns, so a start that traps
// is charged its allowances but not the one it trapped in.
func startFuelOK(f uint64) bool {
	return f+fuel.Refill >= startPasses && f <= 4*startPasses+fuel.Refill
}

// TestStartFunctionsAreMetered: the fuel an instance's start function burns is metered and
// charged: on the call that had to start the instance (Usage.StartFuel, inside Fuel) and
// not on the next call, which finds it warm; to PoolConfig.OnWarmStart for instances started
// ahead of demand (MinInstances, a refill after a discard); and on the call whose start
// failed. Before, the start ran unmetered: a message whose fresh instance's _initialize ran
// 3·10⁸ passes was metered fuel 1.
func TestStartFunctionsAreMetered(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("t-start-meter", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok, err := e.Compile(ctx, "start-loop.wasm", startLoopModule(false), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := e.Compile(ctx, "start-loop-trap.wasm", startLoopModule(true), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    *Module
		cfg  PoolConfig
		// fresh: the first call starts its instance; warm: starts OnWarmStart is told of
		// before the first call, refills after the second call.
		fresh         bool
		warm, refills int
		startFails    bool
	}{
		{name: "on demand", m: ok, cfg: PoolConfig{MaxInstances: 1}, fresh: true},
		{name: "min_instances", m: ok, cfg: PoolConfig{MinInstances: 1, MaxInstances: 1}, warm: 1},
		{name: "refill after max_uses", m: ok, cfg: PoolConfig{MinInstances: 1, MaxInstances: 1, MaxUses: 2}, warm: 1, refills: 1},
		{name: "start traps", m: bad, cfg: PoolConfig{MaxInstances: 1}, fresh: true, startFails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warm warmCharges
			cfg := tc.cfg
			cfg.Binding, cfg.Timeout, cfg.OnWarmStart = "b", 10*time.Second, warm.add
			p, err := ten.NewPool(ctx, tc.m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(ctx) })
			if got := warm.get(); len(got) != tc.warm {
				t.Fatalf("%d warm starts charged before any call, want %d: %+v", len(got), tc.warm, got)
			}
			for _, u := range warm.get() {
				if !startFuelOK(u.StartFuel) || u.Fuel != u.StartFuel || u.StartWall <= 0 {
					t.Fatalf("warm start charged %+v: want fuel = start fuel of %d passes, and its wall time", u, startPasses)
				}
			}

			var out Result
			err = p.CallInto(ctx, &Input{ID: "m1"}, &out)
			u := out.Usage
			if tc.startFails {
				if err == nil || errors.Is(err, ErrTimeout) {
					t.Fatalf("a call whose instance's start traps: err %v, want the start's trap", err)
				}
				if !startFuelOK(u.StartFuel) || u.Fuel != u.StartFuel || u.Wall != 0 {
					t.Fatalf("call whose start failed: usage %+v: want its start's fuel (%d passes) charged, no call", u, startPasses)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.fresh {
				if !startFuelOK(u.StartFuel) || u.StartWall <= 0 || u.Wait < u.StartWall {
					t.Fatalf("first call, on a fresh instance: usage %+v: want the start's fuel (%d passes) and wall time", u, startPasses)
				}
			} else if u.StartFuel != 0 || u.StartWall != 0 {
				t.Fatalf("first call, on a warm instance: usage %+v: want no start", u)
			}
			if own := u.Fuel - u.StartFuel; u.Fuel < u.StartFuel || own == 0 || own >= fuel.Refill {
				t.Fatalf("first call: fuel %d, start %d: want the start plus the handler's own few units", u.Fuel, u.StartFuel)
			}
			if err := p.CallInto(ctx, &Input{ID: "m2"}, &out); err != nil {
				t.Fatal(err)
			}
			if u := out.Usage; u.StartFuel != 0 || u.StartWall != 0 || u.Fuel == 0 || u.Fuel >= fuel.Refill {
				t.Fatalf("second call, on a warm instance: usage %+v: want the handler's few units, no start", u)
			}
			if tc.refills > 0 {
				// The second use discarded the instance; its refill runs in the background.
				deadline := time.Now().Add(30 * time.Second)
				for len(warm.get()) < tc.warm+tc.refills && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			if got := warm.get(); len(got) != tc.warm+tc.refills {
				t.Fatalf("%d warm starts charged, want %d", len(got), tc.warm+tc.refills)
			}
		})
	}
}
