package runtime

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
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

// TestBudgetTables: an instance's tables, on the host's heap and outside its memory limit
// (8 bytes an element, up to 8 MiB an instance at the cap), reserve from the tenant's budget
// before the instance is made: a pool of instances holding 1,000,000 elements each gets no
// more of them than the budget holds, the one past it refused naming the tables, and the
// reservations go when the instances close.
func TestBudgetTables(t *testing.T) {
	const elems = 1_000_000
	e := budgetEngine(t, 0)
	ten := budgetTenant(t, e, "tables", 20<<20) // room for two instances' tables
	m, err := e.Compile(context.Background(), "tables.wasm", tableModule(elems, -1, wasmtest.I32Const(0)), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MaxInstances: 4})
	if err != nil {
		t.Fatal(err)
	}
	var insts []*instance
	for range 2 {
		inst, _, err := p.newInstance(context.Background())
		if err != nil {
			t.Fatalf("instance within the budget: %v", err)
		}
		insts = append(insts, inst)
	}
	if got := ten.MemoryBudget().ByConsumer["instances"]; got < 2*elems*8 {
		t.Errorf("two instances' tables reserve %d bytes; want at least %d", got, 2*elems*8)
	}
	_, _, err = p.newInstance(context.Background())
	var be *BudgetError
	if !errors.As(err, &be) || !strings.Contains(be.What, "tables") || be.Want < elems*8 {
		t.Fatalf("a third instance = %v; want the budget refusing its %d bytes of tables", err, elems*8)
	}
	for _, inst := range insts {
		inst.close(context.Background())
	}
	waitReleased(t, ten, "instances closed")
}

// TestBudgetGlobals: an instance's globals reserve what they cost it on the heap, and a
// module past max_globals is not loaded at all.
func TestBudgetGlobals(t *testing.T) {
	e := budgetEngine(t, 0)
	ten := budgetTenant(t, e, "globals", 0)
	m, err := e.Compile(context.Background(), "globals.wasm", wasmtest.Globals(DefaultMaxGlobals), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MaxInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := ten.MemoryBudget().ByConsumer["instances"]
	inst, _, err := p.newInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := ten.MemoryBudget().ByConsumer["instances"] - before; got < DefaultMaxGlobals*globalBytes {
		t.Errorf("an instance of %d globals reserves %d bytes; want at least %d", DefaultMaxGlobals, got, DefaultMaxGlobals*globalBytes)
	}
	inst.close(context.Background())
	waitReleased(t, ten, "instance closed")
	if _, err := e.Compile(context.Background(), "more.wasm", wasmtest.Globals(DefaultMaxGlobals+1), ABIWqhostV1); !errors.Is(err, ErrCompileLimit) {
		t.Errorf("a module of %d globals: %v; want the max_globals cap", DefaultMaxGlobals+1, err)
	}
}
