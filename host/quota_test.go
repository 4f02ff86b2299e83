package host

import (
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/internal/breaker"
	"github.com/wqhost/wqhost/internal/clock/clocktest"
)

// TestFuelQuotaThrottlesUntilThePeriodRollsOver: a tenant's bindings lease while its fuel
// quota lasts, lease nothing once it is spent (room 0, asked again within quotaRecheck or at
// the period's end, never a failure), and lease again when the period rolls over on the
// hour; a reload raising the quota lets them lease at once; status says which.
func TestFuelQuotaThrottlesUntilThePeriodRollsOver(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 25, 22, 30, 0, 0, time.UTC))
	q := newFuelQuota(clk, config.FuelQuota{Fuel: 1000, Period: time.Hour})
	g := quotaGate{Gate: breaker.NewGateWith(breaker.Options{}, breaker.NewSuspectSlots(), nil), q: q}

	room := func(what string) int {
		t.Helper()
		n, _, recheck := g.LeaseRoom(0)
		if n == 0 && (recheck <= 0 || recheck > quotaRecheck) {
			t.Fatalf("%s: no room and recheck %s: want a recheck within %s", what, recheck, quotaRecheck)
		}
		return n
	}
	if room("fresh quota") == 0 {
		t.Fatal("a fresh quota holds leasing back")
	}
	q.add(600)
	if room("600 of 1000 spent") == 0 {
		t.Fatal("leasing held back with 400 fuel left")
	}
	q.add(600)
	if room("1200 of 1000 spent") != 0 {
		t.Fatal("a spent quota still leases")
	}
	s := q.status()
	if !s.Exhausted || s.Used != 1200 || s.Fuel != 1000 || !s.PeriodEnd.Equal(time.Date(2026, 11, 25, 23, 0, 0, 0, time.UTC)) || s.Throttles != 1 {
		t.Fatalf("status of a spent quota: %+v", s)
	}
	clk.Advance(29 * time.Minute) // 22:59: the same period
	if room("22:59") != 0 {
		t.Fatal("leasing resumed before the period rolled over")
	}
	if _, _, recheck := g.LeaseRoom(0); recheck != time.Minute && recheck != quotaRecheck {
		t.Fatalf("recheck %s a minute before the period ends", recheck)
	}
	clk.Advance(time.Minute) // 23:00: a new period
	if room("23:00") == 0 {
		t.Fatal("leasing still held back after the period rolled over")
	}
	if s := q.status(); s.Exhausted || s.Used != 0 {
		t.Fatalf("status of a new period: %+v", s)
	}

	q.add(1000)
	if room("spent again") != 0 {
		t.Fatal("a spent quota still leases")
	}
	q.set(config.FuelQuota{Fuel: 5000, Period: time.Hour}) // a reload raising it
	if room("raised") == 0 {
		t.Fatal("a raised quota still holds leasing back")
	}
	if s := q.status(); s.Used != 1000 {
		t.Fatalf("a reload of the same period forgot the fuel spent: %+v", s)
	}
}

// TestFuelQuotaOffByDefault: without limits.fuel_quota a tenant has no quota state, and its
// bindings' gate is the breaker's own.
func TestFuelQuotaOffByDefault(t *testing.T) {
	if q := newFuelQuota(clocktest.New(time.Now()), config.FuelQuota{}); q != nil {
		t.Fatalf("quota state without a quota: %+v", q)
	}
	var q *fuelQuota
	if q.status() != nil {
		t.Fatal("status of no quota")
	}
}

// TestFuelQuotaHoldsTheTenantsMessagesInTheQueue: with a quota of about three vowels messages
// per period (an instance's first message of this body costs about 47,000 fuel, setting up
// its table, the next ones about 6,600; 31 days, so it cannot roll over during the test), a
// binding handles a few messages and then leases no more: the rest wait in the
// queue, none failed or dead-lettered, and /v1/status and the metrics say the quota is spent.
func TestFuelQuotaHoldsTheTenantsMessagesInTheQueue(t *testing.T) {
	const n = 10
	h, _ := newHost(t, `  acme:
    limits: {fuel_quota: {fuel: 60000, period: 744h}}
    bindings:
      vowels:
        queue: in
        output: out
        module: builtin:count-vowels-tinygo
        batch_size: 1
        max_workers: 1
        backoff: {min: 5ms, max: 50ms}
`)
	run(t, h)
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = "a quick brown fox jumps over the lazy dog"
	}
	send(t, h, "acme", "in", bodies...)
	quota := func() *QuotaStatus {
		for _, ts := range h.Status(t.Context()).Tenants {
			if ts.Name == "acme" {
				return ts.Quota
			}
		}
		return nil
	}
	eventually(t, "the quota spent", func() bool { q := quota(); return q != nil && q.Exhausted && q.Throttles > 0 })
	done := depth(t, h, "acme", "out")
	time.Sleep(300 * time.Millisecond) // long enough for a few more messages, were any leased
	if d := depth(t, h, "acme", "out"); d != done || d == 0 || d >= n {
		t.Fatalf("%d then %d of %d messages handled: want a few, then none while the quota is spent", done, d, n)
	}
	if d := depth(t, h, "acme", "in"); d != n-done {
		t.Fatalf("input depth %d, want the %d messages not handled", d, n-done)
	}
	bs := bindingStatus(t, h, "acme", "vowels")
	if bs.Failed != 0 || bs.Poisoned != 0 || depth(t, h, "acme", "in-poison") != 0 {
		t.Fatalf("a spent quota failed %d and poisoned %d messages: it must only hold them back", bs.Failed, bs.Poisoned)
	}
	if _, v, ok := series(t, h, "", "wqhost_tenant_fuel_quota_exhausted", map[string]string{"tenant": "acme"}); !ok || v != 1 {
		t.Fatalf("wqhost_tenant_fuel_quota_exhausted = %v (served %v), want 1", v, ok)
	}
	t.Logf("quota 60000 fuel per 31 days: %d of %d messages handled, %d fuel spent, %d held in the queue", done, n, quota().Used, n-done)
}
