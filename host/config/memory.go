package config

import (
	"maps"
	"slices"
)

// Bounds of the memory budgets (docs/limits.md).
const (
	// MinMemoryBudget is the least a host's memory_budget may be: one compile child of a
	// small module and a few instances.
	MinMemoryBudget ByteSize = 64 << 20
	// MinTenantMemoryBudget is the least a tenant's limits.memory_budget may be.
	MinTenantMemoryBudget ByteSize = 4 << 20
	// MaxMemoryBudget is the most either may be.
	MaxMemoryBudget ByteSize = 1 << 40
)

// validateMemoryBudgets checks memory_budget and each tenant's limits.memory_budget.
func (c *Config) validateMemoryBudgets(fail failFunc) {
	if b := c.MemoryBudget; b != 0 && (b < MinMemoryBudget || b > MaxMemoryBudget) {
		fail("memory_budget", "%s is outside %s..%s (0 = from the cgroup's memory limit)", b, MinMemoryBudget, MaxMemoryBudget)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		b := c.Tenants[name].Limits.MemoryBudget
		if b == 0 {
			continue
		}
		hi := MaxMemoryBudget
		if c.MemoryBudget != 0 {
			hi = c.MemoryBudget
		}
		if b < MinTenantMemoryBudget || b > hi {
			fail("tenants."+name+".limits.memory_budget", "%s is outside %s..%s (0 = its weight's share of the host's memory_budget)", b, MinTenantMemoryBudget, hi)
		}
	}
}

// TenantMemoryBudget is the memory budget of tenant name under host, the host's budget in
// bytes: its limits.memory_budget, or else its weight's share of what the tenants without
// one leave of host. 0 when host is 0 and it sets none (unlimited).
func (c *Config) TenantMemoryBudget(name string, host int64) int64 {
	t, ok := c.Tenants[name]
	if !ok {
		return 0
	}
	if t.Limits.MemoryBudget > 0 {
		return int64(t.Limits.MemoryBudget)
	}
	if host <= 0 {
		return 0
	}
	rest, weights := host, 0
	for _, o := range c.Tenants {
		if o.Limits.MemoryBudget > 0 {
			rest -= int64(o.Limits.MemoryBudget)
		} else {
			weights += max(o.Weight, 1)
		}
	}
	if rest <= 0 || weights == 0 {
		// The explicit budgets take the whole host: the others share a small floor, and
		// the host's budget still bounds them all.
		return int64(MinTenantMemoryBudget)
	}
	return max(rest*int64(max(t.Weight, 1))/int64(weights), int64(MinTenantMemoryBudget))
}
