//go:build wqhost_faulthooks

package runtime

import (
	"context"
	"errors"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// Only the fault-hook build (go test -tags wqhost_faulthooks ./runtime) has a host call that
// blocks past every limit (faulthook_on.go), which is what leaves guest code abandoned still
// running (bounded.go).

// TestGuestMemoryOutlivesAbandonedGuest: a start function or self test abandoned inside a
// host call, which fills its memory before and after the call, goes on running on its memory
// while its pool is closed, its tenant refuses to close and the collector runs again and
// again: the mapping stays mapped as long as the guest runs (an unmapped one would end the
// host with SIGSEGV), and is unmapped once the guest has returned.
func TestGuestMemoryOutlivesAbandonedGuest(t *testing.T) {
	const block = 4000 // ms: past the 100 ms limit plus AbandonGrace
	fill := wasmtest.MemoryFill(0, 0x5a, 4*PageBytes)
	body := concat(fill, wasmtest.I32Const(block), wasmtest.Call(0), fill)
	blockImport := []wasmtest.Import{{Module: "wqhost", Name: "fault_block", Params: []byte{wasmtest.I32}}}
	for _, tc := range []struct {
		name string
		f    wasmtest.Func
		run  func(ctx context.Context, ten *Tenant, m *Module, cfg PoolConfig) error
	}{
		{"start function", wasmtest.Func{Export: "_initialize", Body: body}, func(ctx context.Context, ten *Tenant, m *Module, cfg PoolConfig) error {
			cfg.MinInstances = 1
			p, err := ten.NewPool(ctx, m, cfg)
			if err == nil {
				_ = p.Close(ctx)
			}
			return err
		}},
		{"self test", wasmtest.Func{Export: "wqhost_self_test", Results: []byte{wasmtest.I32}, Body: concat(body, wasmtest.I32Const(0))},
			func(ctx context.Context, ten *Tenant, m *Module, cfg PoolConfig) error {
				return ten.Validate(ctx, m, cfg)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := testEngine(t)
			if e.memories.max == 0 {
				t.Skip("no mapped guest memories on this platform")
			}
			ten, err := e.Tenant("t-abandon", TenantLimits{MemoryPages: 16})
			if err != nil {
				t.Fatal(err)
			}
			wasm := wasmtest.ModuleImporting(blockImport, 4,
				wasmtest.Func{Export: "wqhost_abi_v1"}, wasmtest.Handle(wasmtest.I32Const(0)), tc.f)
			m, err := e.Compile(context.Background(), "abandon.wasm", wasm, ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			cfg := PoolConfig{Binding: "b", Timeout: 100 * time.Millisecond, StartTimeout: 100 * time.Millisecond}
			if err := tc.run(context.Background(), ten, m, cfg); !errors.Is(err, ErrAbandoned) {
				t.Fatalf("err = %v; want the guest abandoned in its host call", err)
			}
			if err := ten.Close(context.Background()); err == nil {
				t.Fatal("the tenant closed with its guest abandoned still running")
			}
			deadline := time.Now().Add(time.Minute)
			for ten.Stuck() > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the guest blocked for %d ms still runs a minute on", block)
				}
				goruntime.GC() // unmaps what is unreachable: never the running guest's memory
				if e.memories.live.Load() == 0 {
					t.Fatal("the abandoned guest's memory was unmapped while it still ran")
				}
				time.Sleep(20 * time.Millisecond)
			}
			waitFor(t, "the returned guest's memory unmapped", func() bool {
				goruntime.GC()
				return e.memories.live.Load() == 0
			})
		})
	}
}
