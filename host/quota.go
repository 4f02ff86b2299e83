package host

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/internal/breaker"
	"github.com/wqhost/wqhost/internal/clock"
)

// The tenant fuel quota (limits.fuel_quota; docs/metering.md): the fuel of the tenant's calls
// is added up per period, and once it reaches the quota the tenant's bindings lease no new
// message until the period rolls over. It throttles and never fails a message: messages wait
// in their queue with their dequeue counts untouched, as behind an open circuit breaker.
// Calls already leased finish, so a period can end a few calls past its quota.

// quotaRecheck is how often a throttled listener looks again, so a quota raised by a config
// reload, or a period rolled over, lets it lease within that time.
const quotaRecheck = time.Second

// fuelQuota is a tenant's fuel quota state: its limit, the current period and the fuel spent
// in it. Kept across config reloads of the tenant (like its counters): a reload that changes
// the quota keeps the period's fuel, one that changes the period starts a new one.
type fuelQuota struct {
	clk   clock.Clock
	limit atomic.Uint64 // fuel per period; 0: no quota
	used  atomic.Uint64 // fuel spent in the current period
	// throttles counts the times a listener of the tenant was held back.
	throttles atomic.Uint64

	mu     sync.Mutex
	period time.Duration
	end    time.Time // when the current period ends
}

// newFuelQuota is the state of quota q on clk; nil when q sets none.
func newFuelQuota(clk clock.Clock, q config.FuelQuota) *fuelQuota {
	if q.Fuel <= 0 {
		return nil
	}
	fq := &fuelQuota{clk: clk}
	fq.set(q)
	return fq
}

// set applies a (reloaded) quota.
func (q *fuelQuota) set(c config.FuelQuota) {
	q.limit.Store(uint64(c.Fuel))
	q.mu.Lock()
	defer q.mu.Unlock()
	if c.Period != q.period {
		q.period = c.Period
		q.end = q.clk.Now().Truncate(c.Period).Add(c.Period)
		q.used.Store(0)
	}
}

// add counts fuel spent by a call: an atomic add, no clock read.
func (q *fuelQuota) add(fuel uint64) { q.used.Add(fuel) }

// roll starts a new period if the current one is over, and returns when the current one ends.
func (q *fuelQuota) roll() time.Time {
	now := q.clk.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if !now.Before(q.end) {
		q.end = now.Truncate(q.period).Add(q.period)
		q.used.Store(0)
	}
	return q.end
}

// wait is how long the tenant must wait for its quota to allow leasing: 0 when it allows it now.
func (q *fuelQuota) wait() time.Duration {
	end := q.roll()
	if q.used.Load() < q.limit.Load() {
		return 0
	}
	return max(end.Sub(q.clk.Now()), time.Nanosecond)
}

// QuotaStatus is a tenant's fuel quota in /v1/status.
type QuotaStatus struct {
	Fuel      uint64    `json:"fuel"`       // the quota per period
	Period    string    `json:"period"`     // e.g. "1h0m0s"
	Used      uint64    `json:"used"`       // fuel spent in the current period
	PeriodEnd time.Time `json:"period_end"` // when the current period rolls over
	Exhausted bool      `json:"exhausted"`  // its bindings lease nothing until PeriodEnd
	Throttles uint64    `json:"throttles"`  // times a listener of the tenant was held back
}

// status reads q; nil without a quota.
func (q *fuelQuota) status() *QuotaStatus {
	if q == nil {
		return nil
	}
	end := q.roll()
	q.mu.Lock()
	period := q.period
	q.mu.Unlock()
	s := &QuotaStatus{Fuel: q.limit.Load(), Period: period.String(), Used: q.used.Load(), PeriodEnd: end.UTC(), Throttles: q.throttles.Load()}
	s.Exhausted = s.Used >= s.Fuel
	return s
}

// quotaGate is a binding's breaker gate that also holds leasing back while its tenant's fuel
// quota is spent (listener.LeaseGate). Only bindings of a tenant with a quota have one.
type quotaGate struct {
	*breaker.Gate
	q *fuelQuota
}

// LeaseRoom implements listener.LeaseGate: no room while the quota is spent, asked again
// at the period's end or within quotaRecheck; otherwise the breaker's answer.
func (g quotaGate) LeaseRoom(held int) (int, <-chan struct{}, time.Duration) {
	if w := g.q.wait(); w > 0 {
		g.q.throttles.Add(1)
		return 0, nil, min(w, quotaRecheck)
	}
	return g.Gate.LeaseRoom(held)
}
