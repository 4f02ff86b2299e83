package host

import (
	"context"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/internal/memlimit"
	"github.com/wqhost/wqhost/runtime"
)

// memoryBudget is the host's memory budget and the limit it was taken from.
type memoryBudget struct {
	budget int64 // bytes; 0: unlimited
	limit  int64 // the process's memory limit it came from; 0 when memory_budget was set
	source string
}

// hostMemory is the budget cfg sets, or memlimit's share of the cgroup's or machine's
// memory.
func hostMemory(cfg *config.Config) memoryBudget {
	if cfg.MemoryBudget > 0 {
		return memoryBudget{budget: int64(cfg.MemoryBudget), source: "memory_budget"}
	}
	limit, src := memlimit.Detect()
	return memoryBudget{budget: memlimit.Budget(limit), limit: limit, source: string(src)}
}

// applyMemoryBudgets sets every serving tenant's budget to what cfg gives it: a tenant's
// default is a share, which moves when tenants come and go.
func (h *Host) applyMemoryBudgets(cfg *config.Config) {
	for _, t := range h.tenantList() {
		t.rt.SetMemoryBudget(cfg.TenantMemoryBudget(t.name, h.mem.budget))
	}
}

// MemoryStatus is the host's memory budget as /v1/status reports it (docs/limits.md).
type MemoryStatus struct {
	runtime.BudgetUsage
	// LimitSource says where the budget came from: memory_budget, or the limit it is the
	// share of (a cgroup's, the machine's); ProcessLimit is that limit.
	LimitSource  string `json:"limit_source"`
	ProcessLimit int64  `json:"process_limit_bytes,omitempty"`
	// ResidentBytes is the host process's resident memory now, compile children not
	// counted.
	ResidentBytes int64 `json:"resident_bytes"`
}

func (h *Host) memoryStatus() *MemoryStatus {
	return &MemoryStatus{BudgetUsage: h.engine.MemoryBudget(), LimitSource: h.mem.source,
		ProcessLimit: h.mem.limit, ResidentBytes: memlimit.Resident()}
}

// watchMemory keeps, every second until ctx ends, the host's own share of its budget at
// what its Go heap holds outside the tenants' reservations (hostHeld), and the Go runtime's
// memory limit at what the budget leaves once the reservations outside the Go heap are
// counted (goMemLimit). Only under a cgroup's limit, where the budget is a share of what
// the kernel enforces; an explicit memory_budget bounds the tenants alone.
//
// Why the host's share: the budget is 80 % of the limit, and its headroom was to hold the
// binary, threads and page cache. But the host's own heap (its stores, clients, pools'
// bookkeeping: 150-170 MB in a 1 GiB container with two tenants) was outside every
// reservation, so tenants could reserve the whole budget beside it: a hostile tenant's call
// stacks and a compile child, both within their budgets, took a 1 GiB container to its
// OOM kill (TestFaultBudget, about one run in eight).
func (h *Host) watchMemory(ctx context.Context) {
	if h.mem.limit <= 0 || h.mem.source == string(memlimit.SourceMachine) {
		return
	}
	tune := os.Getenv("GOMEMLIMIT") == "" // an operator's setting stands
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		samples := []rtmetrics.Sample{{Name: heapLiveMetric}, {Name: goroutineStacksMetric}}
		var last int64
		for {
			u := h.engine.MemoryBudget()
			rtmetrics.Read(samples)
			h.engine.SetHostHeld(hostHeld(u, metricBytes(samples[0].Value)+metricBytes(samples[1].Value)))
			// The share just set is on the heap, which goMemLimit does not count: u still holds.
			if want := goMemLimit(h.mem.budget, u); tune && (want-last > 16<<20 || want-last < -16<<20) {
				// SetMemoryLimit stops the world: only for a change worth it.
				debug.SetMemoryLimit(want)
				last = want
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// The runtime/metrics the host's own share is read from.
const (
	heapLiveMetric        = "/gc/heap/live:bytes" // the heap's live objects at the last collection
	goroutineStacksMetric = "/memory/classes/heap/stacks:bytes"
)

// metricBytes is a runtime/metrics byte count, 0 where this Go has no such metric.
func metricBytes(v rtmetrics.Value) int64 {
	if v.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(min(v.Uint64(), 1<<62))
}

// hostHeld is the host's own share of its budget: heap bytes (the Go heap's live objects
// and goroutine stacks) less what reservations hold on the heap (message bodies and
// outputs, guest call stacks; the host's share itself is what is being measured). A
// reservation larger than what it holds yet (a stack reserved at twice its length) makes
// the share smaller, never below 0.
func hostHeld(u runtime.BudgetUsage, heap int64) int64 {
	n := heap
	for _, c := range runtime.Consumers() {
		if c.OnGoHeap() && c != runtime.ConsumerHost {
			n -= u.ByConsumer[c.Key()]
		}
	}
	return max(n, 0)
}

// goMemLimit is the Go runtime's memory limit for a budget of budget bytes: what the
// budget leaves once its reservations outside the Go heap are counted (guest and kernel
// memory are mappings, machine code is executable mappings, compile children are
// processes of their own). What reserves on the heap, the host's own share included, fits
// in that by construction, and the collector then takes the garbage it leaves (a doubled
// stack's old copy) before it adds up past the budget, rather than when the heap has
// doubled. The budget's headroom holds the rest (the binary, threads, the page cache).
func goMemLimit(budget int64, u runtime.BudgetUsage) int64 {
	var outside int64
	for _, c := range runtime.Consumers() {
		if !c.OnGoHeap() {
			outside += u.ByConsumer[c.Key()]
		}
	}
	return max(budget-outside, memlimit.MinHeadroom/2)
}
