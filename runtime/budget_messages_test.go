package runtime

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// TestBudgetOutputs: an output reserves its bytes from the tenant's memory budget from the
// guest's emit until the caller releases the Result (the host, once it sent it), and an
// emit the budget refuses fails the call with the budget's error (the message is retried),
// never a silently dropped output; nothing stays reserved.
func TestBudgetOutputs(t *testing.T) {
	e := budgetEngine(t, 0)
	ten := budgetTenant(t, e, "emitter", 0)
	p, err := ten.NewPool(context.Background(), load(t, e, guestPath, ABIWqhostV1),
		PoolConfig{Binding: "b", MaxInstances: 1, OutputQueue: "out", MaxOutputBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	messages := func() int64 { return ten.MemoryBudget().ByConsumer["messages"] }
	body := bytes.Repeat([]byte("m"), 2<<20) // the guest echoes it: one 2 MiB output

	out, err := p.Call(context.Background(), &Input{ID: "m1", Body: body})
	if err != nil || len(out.Outputs) != 1 {
		t.Fatalf("call = %+v, %v; want one output", out, err)
	}
	if got := messages(); got != int64(len(body)) {
		t.Errorf("an unsent output holds %d bytes of the budget; want its %d", got, len(body))
	}
	out.Release()
	out.Release() // idempotent
	if got := messages(); got != 0 {
		t.Errorf("after Release, outputs hold %d bytes; want 0", got)
	}

	// The instance has grown to hold such a body: only the output needs room now.
	ten.SetMemoryBudget(ten.MemoryBudget().Reserved + 1<<20)
	_, err = p.Call(context.Background(), &Input{ID: "m2", Body: body})
	var be *BudgetError
	if !errors.Is(err, ErrMemoryBudget) || !errors.As(err, &be) || be.Consumer != ConsumerMessages ||
		be.Budget != "tenant emitter" || be.Want != int64(len(body)) {
		t.Fatalf("call past the budget = %v; want the tenant's budget refusing the %d-byte output", err, len(body))
	}
	if got := messages(); got != 0 {
		t.Errorf("after a refused emit, outputs hold %d bytes; want 0", got)
	}

	// A refused reservation is counted, a CallInto reusing its Result releases the old one.
	ten.SetMemoryBudget(0)
	var o Result
	if err := p.CallInto(context.Background(), &Input{ID: "m3", Body: body}, &o); err != nil {
		t.Fatal(err)
	}
	if err := p.CallInto(context.Background(), &Input{ID: "m4", Body: []byte("x")}, &o); err != nil {
		t.Fatal(err)
	}
	if got := messages(); got != 1 {
		t.Errorf("after reusing a Result, outputs hold %d bytes; want the new one's 1", got)
	}
	o.Release()
	if u := ten.MemoryBudget(); u.Refused == 0 || u.ByConsumer["messages"] != 0 {
		t.Errorf("budget = %+v; want one refusal counted and nothing held", u)
	}
}
