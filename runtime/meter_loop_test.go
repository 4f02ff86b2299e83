package runtime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// TestUsageMetersLoopsThatCallNothing: a guest spinning in a loop that calls nothing (its
// fuel kept in a local, package fuel) is metered the fuel it burns, as one that calls
// functions is (TestUsageMetersEveryCall). The yield used to bank only what the fuel global
// held, which such a loop never writes: `wqhost call --timeout 1s` of it reported fuel 0, and
// every attempt of such a guest dead-lettered with `wqhost.fuel` 0, outside any fuel quota.
func TestUsageMetersLoopsThatCallNothing(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("t-meter-loop", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"small loop", wasmtest.Forever(wasmtest.I32Const(1), wasmtest.Drop)},
		{"loop with a memory.fill", wasmtest.Forever(wasmtest.MemoryFill(0, 1, 1024))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := e.Compile(context.Background(), "spin.wasm", handleModule(nil, tc.body, wasmtest.I32Const(0)), ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			var out Result
			if err := p.CallInto(context.Background(), &Input{ID: "m"}, &out); !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			// It ran for its whole limit, many allowances (each a millisecond or two).
			if out.Usage.Fuel < 10*fuel.Refill {
				t.Fatalf("fuel %d after spinning to the time limit: want at least 10 allowances (%d)", out.Usage.Fuel, 10*fuel.Refill)
			}
		})
	}
}
