package host

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/runtime"
)

// Metering (docs/metering.md): every handler call's runtime.Usage is summed on its binding
// and its tenant (served in /v1/status and as Prometheus counters), and a failed attempt's
// figures go with its verdict, to be written on the dead letter if it becomes one.

// usageCounters sum the runtime.Usage of handler calls.
type usageCounters struct {
	calls, fuel, wallNs, hostNs, httpRequests, httpBytes atomic.Uint64
	// starts, startFuel and startWallNs count the instance starts (runtime.Usage.StartFuel):
	// those of calls, whose fuel holds theirs, and those made ahead of demand (addStart).
	starts, startFuel, startWallNs atomic.Uint64
	// memMax is the largest linear memory any call ended with (a high-water mark, not a sum).
	memMax atomic.Uint64
}

// add counts one call's usage.
func (c *usageCounters) add(u runtime.Usage) {
	c.calls.Add(1)
	c.fuel.Add(u.Fuel)
	c.wallNs.Add(uint64(max(u.Wall, 0)))
	if u.HostTime > 0 {
		c.hostNs.Add(uint64(u.HostTime))
	}
	if u.HTTPRequests > 0 {
		c.httpRequests.Add(uint64(u.HTTPRequests))
		c.httpBytes.Add(uint64(max(u.HTTPBytes, 0)))
	}
	if u.StartWall > 0 || u.StartFuel > 0 {
		c.addStartOnly(u)
	}
	for {
		cur := c.memMax.Load()
		if u.MemoryBytes <= cur || c.memMax.CompareAndSwap(cur, u.MemoryBytes) {
			return
		}
	}
}

// addStartOnly counts an instance start's figures (not its fuel, which add and addStart
// count).
func (c *usageCounters) addStartOnly(u runtime.Usage) {
	c.starts.Add(1)
	c.startFuel.Add(u.StartFuel)
	c.startWallNs.Add(uint64(max(u.StartWall, 0)))
}

// addStart counts an instance started ahead of demand (runtime.PoolConfig.OnWarmStart): its
// fuel with the calls', though no call carries it.
func (c *usageCounters) addStart(u runtime.Usage) {
	c.fuel.Add(u.Fuel)
	c.addStartOnly(u)
}

// UsageStatus is what handler calls cost, summed (docs/metering.md for the units).
type UsageStatus struct {
	// Calls is the handler calls metered (a batch call is one).
	Calls uint64 `json:"calls"`
	// Fuel is their fuel units: guest code plus the host work charged to it, instance
	// starts included (StartFuel of it).
	Fuel uint64 `json:"fuel"`
	// Starts is the instances started, for a call or ahead of demand (min_instances, a
	// refill); StartFuel the fuel their start functions spent (part of Fuel), StartSeconds
	// their wall time (not part of WallSeconds).
	Starts       uint64  `json:"starts"`
	StartFuel    uint64  `json:"start_fuel"`
	StartSeconds float64 `json:"start_seconds"`
	// WallSeconds is their wall time in the guest; HostSeconds the part of it spent
	// waiting in host calls (outbound HTTP).
	WallSeconds float64 `json:"wall_seconds"`
	HostSeconds float64 `json:"host_seconds"`
	// HTTPRequests and HTTPBytes are their outbound requests and request plus response
	// body bytes.
	HTTPRequests uint64 `json:"http_requests"`
	HTTPBytes    uint64 `json:"http_bytes"`
	// MemoryHighWaterBytes is the largest linear memory a call ended with.
	MemoryHighWaterBytes uint64 `json:"memory_high_water_bytes"`
}

// status reads c.
func (c *usageCounters) status() UsageStatus {
	return UsageStatus{
		Calls: c.calls.Load(), Fuel: c.fuel.Load(),
		Starts: c.starts.Load(), StartFuel: c.startFuel.Load(), StartSeconds: time.Duration(c.startWallNs.Load()).Seconds(),
		WallSeconds: time.Duration(c.wallNs.Load()).Seconds(), HostSeconds: time.Duration(c.hostNs.Load()).Seconds(),
		HTTPRequests: c.httpRequests.Load(), HTTPBytes: c.httpBytes.Load(),
		MemoryHighWaterBytes: c.memMax.Load(),
	}
}

// meter counts a handler call's usage on the binding and its tenant.
func (b *binding) meter(u runtime.Usage) {
	b.usage.add(u)
	b.tenant.usage.add(u)
	if q := b.tenant.quota; q != nil {
		q.add(u.Fuel)
	}
}

// meterStart counts an instance the binding's pool started ahead of demand
// (runtime.PoolConfig.OnWarmStart) on the binding and its tenant, and in the tenant's fuel
// quota: no message carries its cost.
func (b *binding) meterStart(u runtime.Usage) {
	b.usage.addStart(u)
	b.tenant.usage.addStart(u)
	if q := b.tenant.quota; q != nil {
		q.add(u.Fuel)
	}
}

// usageAttrs are a failed attempt's figures as dead-letter attributes (queue.AttrFuel …). A
// batch call of n messages is attributed to each of them evenly: its figures divided by n,
// with queue.AttrBatchSize saying so; its memory, an instance's, is not divided.
func usageAttrs(u runtime.Usage, n int) map[string]string {
	d := uint64(max(n, 1))
	a := map[string]string{
		queue.AttrFuel:         strconv.FormatUint(u.Fuel/d, 10),
		queue.AttrWallUs:       strconv.FormatInt(u.Wall.Microseconds()/int64(d), 10),
		queue.AttrHostUs:       strconv.FormatInt(u.HostTime.Microseconds()/int64(d), 10),
		queue.AttrMemoryBytes:  strconv.FormatUint(u.MemoryBytes, 10),
		queue.AttrHTTPRequests: strconv.FormatUint(uint64(max(u.HTTPRequests, 0))/d, 10),
		queue.AttrHTTPBytes:    strconv.FormatUint(uint64(max(u.HTTPBytes, 0))/d, 10),
	}
	if n > 1 {
		a[queue.AttrBatchSize] = strconv.Itoa(n)
	}
	return a
}
