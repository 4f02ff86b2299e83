package host

import (
	"context"
	"os"
	"runtime/debug"
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

// tuneGoMemLimit keeps the Go runtime's memory limit at what the host's budget leaves once
// its reservations outside the Go heap are counted (guest and kernel memory are mappings,
// machine code is executable mappings, compile children are processes of their own): what
// reserves on the heap (message bodies and outputs, call stacks) fits in that by
// construction, and the collector then takes the garbage they leave (a doubled stack's old
// copy) before it adds up past the budget, rather than when the heap has doubled. The
// budget's headroom holds the rest (the binary, threads, the page cache). Only under a
// cgroup's limit, and unless GOMEMLIMIT is set: an operator's setting stands. It stops when
// ctx ends.
func (h *Host) tuneGoMemLimit(ctx context.Context) {
	if h.mem.limit <= 0 || h.mem.source == string(memlimit.SourceMachine) || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last int64
		for {
			u := h.engine.MemoryBudget()
			var outside int64
			for _, c := range runtime.Consumers() {
				if !c.OnGoHeap() {
					outside += u.ByConsumer[c.Key()]
				}
			}
			want := max(h.mem.budget-outside, memlimit.MinHeadroom/2)
			// SetMemoryLimit stops the world: only for a change worth it.
			if d := want - last; d > 16<<20 || d < -16<<20 {
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
