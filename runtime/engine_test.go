package runtime

import (
	"context"
	"testing"
)

// TestCompiledReleasedWithLastPool: a version's compiled code lives while a pool of it is
// open and is released with the last one, so hot reloads do not pile up machine code; a
// pool made afterwards still works.
func TestCompiledReleasedWithLastPool(t *testing.T) {
	ctx := context.Background()
	e := testEngine(t)
	ten, err := e.Tenant("t", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, e, guestPath, ABIWqhostV1)
	held := func() int {
		ten.mu.Lock()
		defer ten.mu.Unlock()
		return len(ten.compiled[0])
	}
	a, err := ten.NewPool(ctx, m, PoolConfig{Binding: "a", OutputQueue: "out"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", OutputQueue: "out"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 1 {
		t.Fatalf("after closing one of two pools: %d compiled modules held, want 1", n)
	}
	if out, err := b.Call(ctx, &Input{ID: "m", Body: []byte("still")}); err != nil || string(out.Outputs[0].Body) != "still" {
		t.Fatalf("call on the remaining pool: %v %+v", err, out)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 0 {
		t.Fatalf("after closing both pools: %d compiled modules held, want 0", n)
	}
	c := guestPool(t, e, "t", PoolConfig{Binding: "c"})
	if out, err := c.Call(ctx, &Input{ID: "m", Body: []byte("again")}); err != nil || string(out.Outputs[0].Body) != "again" {
		t.Fatalf("call on a pool made after the release: %v %+v", err, out)
	}
}

// TestTenantCloseAndReplace: a replaced tenant keeps serving its pools until closed while
// the name's new tenant has the new limits (a reload that changes a tenant's memory limit);
// a closed tenant's name starts afresh.
func TestTenantCloseAndReplace(t *testing.T) {
	ctx := context.Background()
	e := testEngine(t)
	old, err := e.Tenant("t", TenantLimits{MemoryPages: 512})
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, e, guestPath, ABIWqhostV1)
	p, err := old.NewPool(ctx, m, PoolConfig{Binding: "b", OutputQueue: "out"})
	if err != nil {
		t.Fatal(err)
	}
	repl, err := e.ReplaceTenant("t", TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := e.Tenant("t", TenantLimits{}); cur != repl || cur.Limits().MemoryPages != 1024 {
		t.Fatalf("Tenant after ReplaceTenant: got the replacement=%v with %+v, want it with 1024 pages", cur == repl, cur.Limits())
	}
	call := func(p *Pool, what string) {
		t.Helper()
		if out, err := p.Call(ctx, &Input{ID: "m", Body: []byte(what)}); err != nil || string(out.Outputs[0].Body) != what {
			t.Fatalf("call on %s: %v %+v", what, err, out)
		}
	}
	call(p, "the replaced tenant's pool")
	q, err := repl.NewPool(ctx, m, PoolConfig{Binding: "b", OutputQueue: "out"})
	if err != nil {
		t.Fatal(err)
	}
	call(q, "the replacement's pool")
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(ctx); err != nil {
		t.Fatalf("closing twice: %v", err)
	}
	call(q, "the replacement's pool after the old tenant closed")
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := repl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fresh, err := e.Tenant("t", TenantLimits{MemoryPages: 256})
	if err != nil {
		t.Fatal(err)
	}
	if fresh == repl || fresh.Limits().MemoryPages != 256 {
		t.Fatalf("Tenant after Close: same=%v limits=%+v, want a new tenant with 256 pages", fresh == repl, fresh.Limits())
	}
}
