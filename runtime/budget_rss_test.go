package runtime

import (
	"context"
	"runtime/debug"
	"testing"

	"github.com/wqhost/wqhost/internal/memlimit"
	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestBudgetInstancesRSS: what an instance memory reserves is what it costs the host in
// resident memory. A guest grows its memory by 1,000 pages and fills them; the process's
// resident memory grows by about the reservation, no more (it prints both).
func TestBudgetInstancesRSS(t *testing.T) {
	const pages = 1000
	e := budgetEngine(t, 0)
	ten := budgetTenant(t, e, "filler", 0)
	body := concat(wasmtest.I32Const(pages), []byte{0x40, 0x00, 0x1a}, // memory.grow; drop
		wasmtest.I32Const(0), wasmtest.I32Const(1), wasmtest.I32Const(pages*PageBytes), // dst, value, length
		[]byte{0xfc, 0x0b, 0x00}, wasmtest.I32Const(0)) // memory.fill; 0
	m, err := e.Compile(context.Background(), "fill.wasm", wasmtest.Module(wasmtest.Func{Export: "wqhost_abi_v1"}, wasmtest.Handle(body)), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MaxInstances: 1, MinInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	debug.FreeOSMemory()
	before, held := memlimit.Resident(), ten.MemoryBudget().ByConsumer["instances"]
	if _, err := p.Call(context.Background(), &Input{ID: "m"}); err != nil {
		t.Fatal(err)
	}
	debug.FreeOSMemory()
	grew, reserved := memlimit.Resident()-before, ten.MemoryBudget().ByConsumer["instances"]-held
	t.Logf("budget instances: reserved=%d MiB measured-rss=%d MiB", reserved>>20, grew>>20)
	if reserved < pages*PageBytes {
		t.Errorf("the grown memory reserved %d bytes; want its %d", reserved, pages*PageBytes)
	}
	if grew > reserved+16<<20 {
		t.Errorf("resident memory grew %d bytes for %d reserved: the budget misses what the memory costs", grew, reserved)
	}
}
