package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// TestUsageMetersEveryCall: a call's Usage (docs/metering.md) reports its fuel, the same for
// the same work on the same instance, more for a call that runs for many allowances (the
// refills by wqhost_yield are counted), and a failed call's too; its wall time, and the
// instance's memory high-water mark.
func TestUsageMetersEveryCall(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("t", TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 200 * time.Millisecond
	p, err := ten.NewPool(context.Background(), load(t, e, "testdata/spin/spin-tinygo.wasm", ABIWqhostV1),
		PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 1, Timeout: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })

	var first, out Result
	for i := range 3 {
		if err := p.CallInto(context.Background(), &Input{ID: "m", Body: []byte("ok")}, &out); err != nil {
			t.Fatal(err)
		}
		u := out.Usage
		if u.Fuel == 0 || u.Wall <= 0 || u.MemoryBytes == 0 {
			t.Fatalf("call %d: usage %+v: want fuel, wall time and memory", i, u)
		}
		if u.Fuel >= fuel.Refill {
			t.Fatalf("call %d: fuel %d for a handler that returns at once: want less than one allowance (%d)", i, u.Fuel, fuel.Refill)
		}
		if i == 0 {
			first = out
		} else if u.Fuel != first.Usage.Fuel {
			t.Fatalf("call %d: fuel %d, first call %d: the same work on the same instance must cost the same", i, u.Fuel, first.Usage.Fuel)
		}
	}

	err = p.CallInto(context.Background(), &Input{ID: "spin", Body: []byte("loop")}, &out)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("loop: %v, want ErrTimeout", err)
	}
	u := out.Usage
	// The loop ran for its whole limit, refilled many times: its fuel is many allowances.
	if u.Fuel < 10*fuel.Refill {
		t.Fatalf("loop until the time limit: fuel %d, want at least 10 allowances (%d)", u.Fuel, 10*fuel.Refill)
	}
	if u.Wall < limit/2 {
		t.Fatalf("loop until the %s time limit: wall %s", limit, u.Wall)
	}
	t.Logf("spin-tinygo: ok message %d fuel, loop to %s limit %d fuel in %s", first.Usage.Fuel, limit, u.Fuel, u.Wall)
}

// TestUsageMemoryHighWater: MemoryBytes is the linear memory after the call, which holds what
// the call allocated.
func TestUsageMemoryHighWater(t *testing.T) {
	e := testEngine(t)
	p := guestPool(t, e, "t", PoolConfig{Binding: "b", MaxInstances: 1, Timeout: 10 * time.Second})
	var out Result
	if err := p.CallInto(context.Background(), &Input{ID: "m", Body: []byte("grow:8")}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Usage.MemoryBytes < 8<<20 {
		t.Fatalf("a call that allocated 8 MiB: memory high-water mark %d bytes", out.Usage.MemoryBytes)
	}
}

// TestUsageOfBatchCall: a batch call's Usage is the whole call's.
func TestUsageOfBatchCall(t *testing.T) {
	e := testEngine(t)
	p := batchPool(t, e, PoolConfig{Binding: "b", MaxInstances: 1, Timeout: 10 * time.Second})
	bo, err := p.CallBatch(context.Background(), []*Input{{ID: "a"}, {ID: "b"}, {ID: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if bo.Usage.Fuel == 0 || bo.Usage.Wall <= 0 {
		t.Fatalf("batch usage %+v: want fuel and wall time", bo.Usage)
	}
}
