package host

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/wqhost/wqhost/runtime"
)

// The memory budgets' series (docs/limits.md): the host's and each tenant's limit, what is
// reserved by consumer, and the refusals an operator alerts on.
var (
	memoryBudgetDesc = prometheus.NewDesc("wqhost_memory_budget_bytes",
		"The host's memory budget (memory_budget, or a share of the cgroup's memory limit); 0: unlimited.", nil, nil)
	memoryReservedDesc = prometheus.NewDesc("wqhost_memory_reserved_bytes",
		"Bytes reserved from the host's memory budget, by consumer (instances, kernel, modules, compile).", []string{"consumer"}, nil)
	memoryRefusedDesc = prometheus.NewDesc("wqhost_memory_refused_total",
		"Reservations the host's memory budget refused.", nil, nil)
	tenantMemoryBudgetDesc = prometheus.NewDesc("wqhost_tenant_memory_budget_bytes",
		"The tenant's memory budget (limits.memory_budget, or its weight's share of the host's); 0: unlimited.", []string{"tenant"}, nil)
	tenantMemoryReservedDesc = prometheus.NewDesc("wqhost_tenant_memory_reserved_bytes",
		"Bytes reserved from the tenant's memory budget, by consumer (instances, kernel, modules).", []string{"tenant", "consumer"}, nil)
	tenantMemoryRefusedDesc = prometheus.NewDesc("wqhost_tenant_memory_refused_total",
		"Reservations the tenant's memory budget, or the host's on its behalf, refused.", []string{"tenant"}, nil)
)

var memoryDescs = []*prometheus.Desc{memoryBudgetDesc, memoryReservedDesc, memoryRefusedDesc,
	tenantMemoryBudgetDesc, tenantMemoryReservedDesc, tenantMemoryRefusedDesc}

// collectMemory sends the budgets' series of st.
func collectMemory(ch chan<- prometheus.Metric, st *Status) {
	if st.Memory != nil {
		ch <- prometheus.MustNewConstMetric(memoryBudgetDesc, prometheus.GaugeValue, float64(st.Memory.Limit))
		ch <- prometheus.MustNewConstMetric(memoryRefusedDesc, prometheus.CounterValue, float64(st.Memory.Refused))
		byConsumer(ch, memoryReservedDesc, st.Memory.BudgetUsage)
	}
	for _, t := range st.Tenants {
		ch <- prometheus.MustNewConstMetric(tenantMemoryBudgetDesc, prometheus.GaugeValue, float64(t.Memory.Limit), t.Name)
		ch <- prometheus.MustNewConstMetric(tenantMemoryRefusedDesc, prometheus.CounterValue, float64(t.Memory.Refused), t.Name)
		byConsumer(ch, tenantMemoryReservedDesc, t.Memory, t.Name)
	}
}

func byConsumer(ch chan<- prometheus.Metric, d *prometheus.Desc, u runtime.BudgetUsage, lv ...string) {
	for _, c := range slices.Sorted(maps.Keys(u.ByConsumer)) {
		if d == tenantMemoryReservedDesc && (c == runtime.ConsumerCompile.Key() || c == runtime.ConsumerHost.Key()) {
			continue // compile children and the host's own heap reserve from the host's budget only
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(u.ByConsumer[c]), append(lv, c)...)
	}
}
