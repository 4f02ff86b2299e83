package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestGuestStackReserved: a guest call's native stack reserves from its tenant's memory
// budget as it grows (twice its length, ahead of wazero's next doubling), so an endless
// recursion in a tenant with a small budget fails on the budget's word long before
// wazero's 100 MB stack ceiling, with thin frames and with frames of 2,000 live locals (the
// code that fills them is charged, so the call yields often enough to be looked at);
// nothing stays reserved once the instance is gone. Unbudgeted, it is the stack overflow it
// was.
func TestGuestStackReserved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		locals int
		budget int64
		want   error
	}{
		{"thin frames, 24 MiB budget", 0, 24 << 20, ErrMemoryBudget},
		{"2,000 locals a frame, 24 MiB budget", 2000, 24 << 20, ErrMemoryBudget},
		{"unbudgeted", 0, 0, ErrStackOverflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := budgetEngine(t, 0)
			ten := budgetTenant(t, e, "deep", tc.budget)
			m, err := e.Compile(context.Background(), "rec.wasm", wasmtest.Recursion(tc.locals), ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MaxInstances: 1, MinInstances: 1})
			if err != nil {
				t.Fatal(err)
			}
			if idx := p.stackIdx.Load(); idx < 0 {
				t.Fatalf("stackField found no stack in wazero's function value (%d): the host reads no guest stack", idx)
			}
			_, err = p.Call(context.Background(), &Input{ID: "m"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("call = %v; want %v", err, tc.want)
			}
			u := ten.MemoryBudget()
			var be *BudgetError
			if tc.budget > 0 && (!errors.As(err, &be) || be.Consumer != ConsumerStacks || u.Peak > tc.budget) {
				t.Errorf("refused by %+v, peak %d; want the call stacks refused within the %d-byte budget", be, u.Peak, tc.budget)
			}
			if tc.budget > 0 {
				t.Logf("budget stacks: %s refused with %d MiB reserved of a %d MiB budget", tc.name, u.Peak>>20, tc.budget>>20)
			}
			if tc.budget > 0 && u.ByConsumer["stacks"] != 0 {
				t.Errorf("the trapped instance's stacks hold %d bytes; want 0 once it is gone", u.ByConsumer["stacks"])
			}
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := ten.MemoryBudget().ByConsumer["stacks"]; got != 0 {
				t.Errorf("after close, stacks hold %d bytes; want 0", got)
			}
		})
	}
}

// TestStartStackReserved: an _initialize that recurses without end is a call of the host's
// too (Pool.newInstance runs it): its stack reserves from the tenant's budget, and the
// instance's start fails on the budget's word, not at wazero's 100 MB ceiling.
func TestStartStackReserved(t *testing.T) {
	e := budgetEngine(t, 0)
	ten := budgetTenant(t, e, "deepstart", 24<<20)
	mod := wasmtest.Module(wasmtest.Func{Export: "_initialize", Body: wasmtest.Call(0)},
		wasmtest.Func{Export: "wqhost_abi_v1"}, wasmtest.Handle(wasmtest.I32Const(0)))
	m, err := e.Compile(context.Background(), "deepstart.wasm", mod, ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MaxInstances: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	_, err = p.Call(context.Background(), &Input{ID: "m"})
	var be *BudgetError
	if !errors.As(err, &be) || be.Consumer != ConsumerStacks {
		t.Fatalf("a call whose instance's start recursed = %v; want the budget refusing its call stack", err)
	}
	if u := ten.MemoryBudget(); u.Peak > 24<<20 || u.ByConsumer["stacks"] != 0 {
		t.Errorf("budget %+v: want the stack refused within the budget and nothing held after", u)
	}
}
