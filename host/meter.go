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
	for {
		cur := c.memMax.Load()
		if u.MemoryBytes <= cur || c.memMax.CompareAndSwap(cur, u.MemoryBytes) {
			return
		}
	}
}

// UsageStatus is what handler calls cost, summed (docs/metering.md for the units).
type UsageStatus struct {
	// Calls is the handler calls metered (a batch call is one).
	Calls uint64 `json:"calls"`
	// Fuel is their fuel units: guest code plus the host work charged to it.
	Fuel uint64 `json:"fuel"`
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
