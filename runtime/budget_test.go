package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitBudget bounds every wait in the budget tests: long enough for a loaded CI machine
// under the race detector, short enough to fail with a message rather than a test timeout.
const waitBudget = 30 * time.Second

// budgetPair is a host budget and a tenant budget under it.
func budgetPair(host, tenant int64) (*memBudget, *memBudget) {
	h := newMemBudget("host", host, nil)
	return h, newMemBudget("tenant t", tenant, h)
}

// TestBudgetRefusals: a reservation is refused by the first budget of its chain it does not
// fit, which the error names, and counted there and in every budget below; the budgets keep
// nothing of it.
func TestBudgetRefusals(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		host, tenant               int64
		other                      int64 // reserved in the host by another tenant first
		want                       int64
		refuser                    string // "": fits
		hostRefused, tenantRefused int64
	}{
		{"fits", 100, 80, 0, 80, "", 0, 0},
		{"over the tenant", 100, 80, 0, 81, "tenant t", 0, 1},
		{"within the tenant, host full", 100, 80, 50, 60, "host", 1, 1},
		{"unlimited tenant, host full", 100, 0, 50, 60, "host", 1, 1},
		{"unlimited host", 0, 80, 1 << 40, 80, "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, tb := budgetPair(tc.host, tc.tenant)
			other := newMemBudget("tenant other", 0, h)
			if err := other.reserve(ConsumerModules, tc.other, "other"); err != nil {
				t.Fatal(err)
			}
			err := tb.reserve(ConsumerInstances, tc.want, "binding b")
			if tc.refuser == "" {
				if err != nil {
					t.Fatalf("reserve %d: %v; want it to fit", tc.want, err)
				}
				if u := tb.usage(); u.Reserved != tc.want || u.ByConsumer["instances"] != tc.want || u.Peak != tc.want {
					t.Fatalf("tenant after reserving %d: %+v", tc.want, u)
				}
				return
			}
			var be *BudgetError
			if !errors.As(err, &be) || !errors.Is(err, ErrMemoryBudget) {
				t.Fatalf("reserve %d: %v; want a *BudgetError wrapping ErrMemoryBudget", tc.want, err)
			}
			if be.Budget != tc.refuser || be.What != "binding b" || be.Want != tc.want || be.Consumer != ConsumerInstances {
				t.Fatalf("refusal %+v; want budget %q, what %q, want %d", be, tc.refuser, "binding b", tc.want)
			}
			if !strings.Contains(err.Error(), tc.refuser+" memory budget") {
				t.Fatalf("refusal %q does not name the %s budget", err, tc.refuser)
			}
			hu, tu := h.usage(), tb.usage()
			if hu.Refused != tc.hostRefused || tu.Refused != tc.tenantRefused {
				t.Fatalf("refusals counted: host %d, tenant %d; want %d, %d", hu.Refused, tu.Refused, tc.hostRefused, tc.tenantRefused)
			}
			// Nothing of a refused reservation stays, not even in the peak: the tenant never
			// held it.
			if tu.Reserved != 0 || tu.Peak != 0 || tu.ByConsumer["instances"] != 0 {
				t.Fatalf("tenant after a refusal: %+v; want nothing reserved, ever", tu)
			}
			if hu.Reserved != tc.other || hu.ByConsumer["instances"] != 0 {
				t.Fatalf("host after a refusal: %+v; want only the other tenant's %d", hu, tc.other)
			}
		})
	}
}

// TestBudgetUsageByConsumer: usage says what each consumer holds, in the tenant and in the
// host, and release pairs bring every count back to 0, never below.
func TestBudgetUsageByConsumer(t *testing.T) {
	h, tb := budgetPair(1000, 500)
	sizes := map[Consumer]int64{ConsumerInstances: 10, ConsumerKernel: 20, ConsumerModules: 30}
	for c, n := range sizes {
		if err := tb.reserve(c, n, c.String()); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.reserve(ConsumerCompile, 40, "compiling m"); err != nil {
		t.Fatal(err)
	}
	tu, hu := tb.usage(), h.usage()
	for c, n := range sizes {
		if tu.ByConsumer[c.Key()] != n || hu.ByConsumer[c.Key()] != n {
			t.Errorf("%s: tenant %d, host %d; want %d in both", c.Key(), tu.ByConsumer[c.Key()], hu.ByConsumer[c.Key()], n)
		}
	}
	if tu.ByConsumer["compile"] != 0 || hu.ByConsumer["compile"] != 40 || tu.Reserved != 60 || hu.Reserved != 100 {
		t.Fatalf("tenant %+v, host %+v; want 60 reserved in the tenant, 100 (40 compiling) in the host", tu, hu)
	}
	if tu.Limit != 500 || hu.Limit != 1000 {
		t.Fatalf("limits %d, %d; want 500, 1000", tu.Limit, hu.Limit)
	}
	for c, n := range sizes {
		tb.release(c, n)
	}
	h.release(ConsumerCompile, 40)
	// Releasing nothing, or a negative size, changes nothing.
	tb.release(ConsumerInstances, 0)
	tb.release(ConsumerInstances, -5)
	for _, u := range []BudgetUsage{tb.usage(), h.usage()} {
		if u.Reserved != 0 {
			t.Errorf("reserved %d after every release; want 0", u.Reserved)
		}
		for k, v := range u.ByConsumer {
			if v != 0 {
				t.Errorf("%s: %d after every release; want 0", k, v)
			}
		}
	}
	if hu := h.usage(); hu.Peak != 100 {
		t.Errorf("host peak %d; want 100", hu.Peak)
	}
	var nilBudget *memBudget // an engine without budgets: everything fits, nothing counts
	if err := nilBudget.reserve(ConsumerInstances, 1<<50, "x"); err != nil || nilBudget.usage().Reserved != 0 {
		t.Fatalf("nil budget: %v", err)
	}
}

// TestBudgetReserveWait: reserveWait returns once a release makes room, refuses at once what
// could never fit, and gives up when its context ends.
func TestBudgetReserveWait(t *testing.T) {
	ctx := context.Background()
	t.Run("release wakes it", func(t *testing.T) {
		h, tb := budgetPair(100, 0)
		if err := tb.reserve(ConsumerModules, 70, "m"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- h.reserveWait(ctx, ConsumerCompile, 50, "compiling c") }()
		select {
		case err := <-done:
			t.Fatalf("reserveWait returned %v with 70 of 100 reserved; want it to wait for room for 50", err)
		case <-time.After(20 * time.Millisecond):
			// No proof it waits forever, but a reserveWait that did not wait would have
			// returned by now, and the check below holds either way.
		}
		tb.release(ConsumerModules, 70) // a tenant's release is the host's too
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("reserveWait after the release: %v", err)
			}
		case <-time.After(waitBudget):
			t.Fatalf("reserveWait still waiting %s after a release left room", waitBudget)
		}
		if u := h.usage(); u.ByConsumer["compile"] != 50 || u.Refused != 0 {
			t.Fatalf("host after the wait: %+v; want 50 compiling and no refusal counted", u)
		}
	})
	t.Run("larger than the budget", func(t *testing.T) {
		h, tb := budgetPair(100, 40)
		for _, tc := range []struct {
			b       *memBudget
			n       int64
			refuser string
		}{{h, 101, "host"}, {tb, 41, "tenant t"}, {tb, 101, "tenant t"}} {
			err := tc.b.reserveWait(ctx, ConsumerCompile, tc.n, "compiling big")
			var be *BudgetError
			if !errors.As(err, &be) || be.Budget != tc.refuser {
				t.Fatalf("reserveWait of %d: %v; want a refusal at once by the %s budget", tc.n, err, tc.refuser)
			}
		}
		if h.usage().Reserved != 0 || tb.usage().Refused != 2 {
			t.Fatalf("host %+v, tenant %+v; want nothing reserved, the tenant's two refusals counted", h.usage(), tb.usage())
		}
	})
	t.Run("context ends", func(t *testing.T) {
		h, _ := budgetPair(100, 0)
		if err := h.reserve(ConsumerModules, 100, "m"); err != nil {
			t.Fatal(err)
		}
		cause := errors.New("shutting down")
		cctx, cancel := context.WithCancelCause(ctx)
		done := make(chan error, 1)
		go func() { done <- h.reserveWait(cctx, ConsumerCompile, 10, "compiling c") }()
		cancel(cause)
		select {
		case err := <-done:
			if !errors.Is(err, ErrMemoryBudget) || !errors.Is(err, cause) {
				t.Fatalf("reserveWait after its context ended: %v; want the refusal and the context's cause", err)
			}
		case <-time.After(waitBudget):
			t.Fatalf("reserveWait still waiting %s after its context ended", waitBudget)
		}
		if u := h.usage(); u.Reserved != 100 {
			t.Fatalf("host reserved %d after a wait gave up; want the 100 held before", u.Reserved)
		}
	})
}

// TestBudgetForce: force counts what was allocated already, past the limit, and a later
// release takes it back.
func TestBudgetForce(t *testing.T) {
	h, tb := budgetPair(100, 50)
	tb.force(ConsumerInstances, 80)
	if tu, hu := tb.usage(), h.usage(); tu.Reserved != 80 || hu.Reserved != 80 || tu.Refused != 0 {
		t.Fatalf("after force: tenant %+v, host %+v; want 80 in both, no refusal", tu, hu)
	}
	if err := tb.reserve(ConsumerInstances, 1, "b"); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("reserve past a forced overdraft: %v; want a refusal", err)
	}
	tb.release(ConsumerInstances, 80)
	if tu, hu := tb.usage(), h.usage(); tu.Reserved != 0 || hu.Reserved != 0 {
		t.Fatalf("after release: tenant %d, host %d; want 0", tu.Reserved, hu.Reserved)
	}
}

// TestBudgetConcurrent: tenants reserving and releasing at once, some refused by their own
// budget, some by the host's, some waiting, end with nothing reserved anywhere and never more
// than a limit reserved at once (run it with -race).
func TestBudgetConcurrent(t *testing.T) {
	const hostLimit, tenantLimit = 1000, 400
	h := newMemBudget("host", hostLimit, nil)
	tenants := []*memBudget{
		newMemBudget("tenant a", tenantLimit, h),
		newMemBudget("tenant b", tenantLimit, h),
		newMemBudget("tenant c", 0, h),
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitBudget)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 8 {
		tb := tenants[g%len(tenants)]
		wg.Go(func() {
			for i := range 500 {
				n := int64(1 + (g*31+i*17)%150)
				c := Consumer((g + i) % int(numConsumers))
				var err error
				if i%10 == 0 {
					err = tb.reserveWait(ctx, c, n, "waiter")
				} else {
					err = tb.reserve(c, n, "reserver")
				}
				if err != nil {
					if !errors.Is(err, ErrMemoryBudget) {
						t.Errorf("reserve: %v", err)
						return
					}
					continue
				}
				tb.release(c, n)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("a reserveWait was still waiting after %s with every reservation released in turn", waitBudget)
	}
	for _, b := range append(tenants, h) {
		u := b.usage()
		if u.Reserved != 0 {
			t.Errorf("%s: %d reserved at the end; want 0", b.name, u.Reserved)
		}
		for k, v := range u.ByConsumer {
			if v != 0 {
				t.Errorf("%s: %s %d at the end; want 0", b.name, k, v)
			}
		}
		if u.Limit > 0 && u.Peak > u.Limit {
			t.Errorf("%s: peak %d above its limit %d", b.name, u.Peak, u.Limit)
		}
	}
}

// TestBudgetHostHeld: the host's own share (ConsumerHost) is set, never refused, even past
// the limit, and tenants' reservations are refused that much sooner; lowering it makes room
// again and wakes a waiting reservation.
func TestBudgetHostHeld(t *testing.T) {
	h, tb := budgetPair(100, 80)
	h.set(ConsumerHost, 60)
	if err := tb.reserve(ConsumerStacks, 50, "binding b"); err == nil {
		t.Fatal("a tenant reserved 50 of a budget of 100 whose host holds 60")
	} else if be := (*BudgetError)(nil); !errors.As(err, &be) || be.Budget != "host" {
		t.Fatalf("refusal %v; want the host's budget to refuse", err)
	}
	h.set(ConsumerHost, 120) // measured, not asked for: past the limit too
	if u := h.usage(); u.Reserved != 120 || u.ByConsumer["host"] != 120 || u.Peak != 120 {
		t.Fatalf("host after setting its share to 120: %+v", u)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBudget)
		defer cancel()
		done <- tb.reserveWait(ctx, ConsumerCompile, 50, "compiling m")
	}()
	for h.waiters.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	h.set(ConsumerHost, 30)
	if err := <-done; err != nil {
		t.Fatalf("waiting reservation after the host's share fell to 30: %v", err)
	}
	if u := h.usage(); u.Reserved != 80 || u.ByConsumer["host"] != 30 || u.ByConsumer["compile"] != 50 {
		t.Fatalf("host after the share fell and the tenant reserved 50: %+v", u)
	}
	if u := tb.usage(); u.ByConsumer["host"] != 0 {
		t.Fatalf("the host's own share shows in the tenant: %+v", u)
	}
}
