package host

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics is the host's own Prometheus registry. Counters and gauges are read from the
// listeners, pools and plugins at scrape time (one source of truth with /v1/status); the
// handler latency histogram is observed per call.
//
// With metrics.per_binding (the default) every series is labelled tenant, binding and queue:
// seriesPerBinding (52) series per binding, plus 3 per policy plugin: 520,000 at 10,000
// bindings. With per_binding false the same names are served summed per tenant (label
// tenant only), so a scrape's size follows the tenants, not the bindings. Three series
// change meaning: wqhost_module_info counts the tenant's bindings running each digest,
// wqhost_module_loaded_timestamp_seconds is the latest load, wqhost_plugin_up counts the
// plugins running; wqhost_breaker_state, a state, is replaced by wqhost_tenant_breakers
// (bindings per breaker state). The choice is made at start: a reload that changes it is
// refused, since a metric's labels cannot change under a registry.
type metrics struct {
	h          *Host
	reg        *prometheus.Registry
	latency    *prometheus.HistogramVec
	perBinding bool
	labels     []string           // bindingLabels, or tenant alone
	descs      []*prometheus.Desc // by bindingMetrics index; nil: not served
	// The series not in bindingMetrics, labelled labels plus one.
	queueCalls, messages, module, moduleLoaded, pluginUp, pluginFallbacks, pluginRestarts *prometheus.Desc
	moduleReloadFailed                                                                    *prometheus.Desc // only while failing
	breakers                                                                              *prometheus.Desc // per tenant only
}

var bindingLabels = []string{"tenant", "binding", "queue"}

// latencyBuckets are the handler latency histogram's: 100µs .. ~26s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// seriesPerBinding is the number of series one binding adds with metrics.per_binding: one
// per bindingMetrics entry, one per queue call, one per depth state, the module's info and
// load time, and the latency histogram's buckets, +Inf, sum and count. Policy plugins add 3
// each.
var seriesPerBinding = len(bindingMetrics) + len(queueCallNames) + len(depthStates) + 2 + len(latencyBuckets) + 3

// depthStates are the values of wqhost_queue_messages' state label.
var depthStates = []string{"visible", "leased", "delayed"}

// depthValues are s's split in depthStates' order.
func depthValues(s DepthSplit) []int64 { return []int64{s.Visible, s.Leased, s.Delayed} }

func newMetrics(h *Host) *metrics {
	m := &metrics{h: h, reg: prometheus.NewRegistry(), perBinding: h.cfg.Metrics.PerBinding, labels: bindingLabels}
	if !m.perBinding {
		m.labels = []string{"tenant"}
	}
	with := func(extra string) []string { return append(slices.Clone(m.labels), extra) }
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wqhost_handler_duration_seconds",
		Help:    "Wall time of handler calls (module execution), by binding (by tenant with metrics.per_binding false).",
		Buckets: latencyBuckets,
	}, m.labels)
	for _, sp := range bindingMetrics {
		var d *prometheus.Desc
		if m.perBinding || !sp.perBindingOnly {
			d = prometheus.NewDesc(sp.name, sp.help, m.labels, nil)
		}
		m.descs = append(m.descs, d)
	}
	m.queueCalls = prometheus.NewDesc("wqhost_queue_calls_total",
		"Backend calls made by the listener (the whitepaper's cost model), by call.", with("call"), nil)
	m.messages = prometheus.NewDesc("wqhost_queue_messages",
		"The input queue's depth by state: visible, leased (in flight, or released for a later retry) and delayed; "+
			"visible + leased is the scaling signal that waits for work in flight (docs/deploy.md). "+
			"Without a backend split (azure): visible is the approximate depth less this host's leases, leased this host's, delayed 0.",
		with("state"), nil)
	m.module = prometheus.NewDesc("wqhost_module_info",
		"The module version a binding runs (value 1; per tenant: its bindings running it), with its sha256 digest.", with("digest"), nil)
	m.moduleLoaded = prometheus.NewDesc("wqhost_module_loaded_timestamp_seconds",
		"When the binding's module version was loaded (per tenant: the latest).", m.labels, nil)
	m.moduleReloadFailed = prometheus.NewDesc("wqhost_module_reload_failed",
		"1 while the binding's last module reload was refused and it runs its previous version (per tenant: such bindings); served only while above 0.", m.labels, nil)
	m.pluginUp = prometheus.NewDesc("wqhost_plugin_up",
		"1 while the binding's policy plugin runs, 0 while the built-in fallback answers (per tenant: plugins running).", with("policy"), nil)
	m.pluginFallbacks = prometheus.NewDesc("wqhost_plugin_fallbacks_total",
		"Policy decisions answered by the built-in fallback instead of the plugin.", with("policy"), nil)
	m.pluginRestarts = prometheus.NewDesc("wqhost_plugin_restarts_total",
		"Restarts of the binding's policy plugin after a crash.", with("policy"), nil)
	if !m.perBinding {
		m.breakers = prometheus.NewDesc("wqhost_tenant_breakers",
			"The tenant's bindings whose circuit breaker is in each state (closed, open, half-open).", []string{"tenant", "state"}, nil)
	}
	m.reg.MustRegister(m.latency, m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// latencyFor is the latency series a binding observes: its own, or its tenant's.
func (m *metrics) latencyFor(tenant, binding, queue string) prometheus.Observer {
	return m.latency.WithLabelValues(m.labelValues(tenant, binding, queue)...)
}

// labelValues are the label values of a binding's series: its own, or its tenant's.
func (m *metrics) labelValues(tenant, binding, queue string) []string {
	if m.perBinding {
		return []string{tenant, binding, queue}
	}
	return []string{tenant}
}

// metricSpec is one series read from a BindingStatus.
type metricSpec struct {
	name, help string
	kind       prometheus.ValueType
	val        func(s *BindingStatus) float64
	// perBindingOnly marks a value that means nothing summed (a state): not served per tenant.
	perBindingOnly bool
}

func spec(name, help string, kind prometheus.ValueType, val func(s *BindingStatus) float64) metricSpec {
	return metricSpec{name: name, help: help, kind: kind, val: val}
}

// bindingMetrics are the series read from each BindingStatus. With metrics.per_binding
// false each is summed per tenant, except perBindingOnly ones.
var bindingMetrics = []metricSpec{
	spec("wqhost_messages_processed_total", "Messages handled successfully and deleted.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Processed) }),
	spec("wqhost_messages_failed_total", "Failed handler calls (each failure of each delivery).", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Failed) }),
	spec("wqhost_messages_retried_total", "Failed messages released for a later retry.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Retried) }),
	spec("wqhost_messages_poisoned_total", "Messages moved to the <queue>-poison queue.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Poisoned) }),
	spec("wqhost_queue_depth", "Approximate messages in the input queue, leased ones included.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Depth) }),
	spec("wqhost_dead_letter_depth", "Messages in the binding's <queue>-poison queue.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.DeadLetterDepth) }),
	spec("wqhost_workers", "Dequeue workers running.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Workers) }),
	spec("wqhost_helper_workers_total", "Workers started to receive while a slow message held its batch's worker.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.HelperWorkers) }),
	spec("wqhost_in_flight", "Handler calls running.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.InFlight) }),
	spec("wqhost_leased", "Messages leased and not yet through their handler call (at most pool max_instances plus as many prefetched).", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Leased) }),
	spec("wqhost_leased_idle", "Messages leased and not started yet.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.LeasedIdle) }),
	spec("wqhost_leases_lost_total", "Messages whose lease ran out before they were settled (they are redelivered).", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.LeasesLost) }),
	spec("wqhost_pool_instances", "Live module instances in the binding's pool.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Pool.Instances) }),
	spec("wqhost_pool_instances_busy", "Module instances running a call.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Pool.Busy) }),
	spec("wqhost_pool_traps_total", "Handler calls that trapped.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Pool.Traps) }),
	spec("wqhost_http_requests_total", "Outbound HTTP requests sent by the binding's handlers.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.HTTP.Requests) }),
	spec("wqhost_http_sent_bytes_total", "Outbound HTTP request body bytes.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.HTTP.BytesOut) }),
	spec("wqhost_http_received_bytes_total", "Outbound HTTP response body bytes read by handlers.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.HTTP.BytesIn) }),
	spec("wqhost_http_wait_seconds_total", "Time handlers spent waiting on outbound HTTP.", prometheus.CounterValue, func(s *BindingStatus) float64 { return s.HTTP.WaitSeconds }),
	spec("wqhost_binding_running", "Handler calls of the binding holding a slot.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Running) }),
	{name: "wqhost_breaker_state", help: "The binding's circuit breaker: 0 closed, 1 open (leasing nothing), 2 half-open (probing one message at a time).", kind: prometheus.GaugeValue, val: func(s *BindingStatus) float64 { return breakerGauge[s.Breaker.State] }, perBindingOnly: true},
	spec("wqhost_breaker_trips_total", "Times the binding's circuit breaker opened.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Breaker.Trips) }),
	spec("wqhost_pool_timeouts_total", "Handler calls that exceeded the time limit.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Pool.Timeouts) }),
	spec("wqhost_handler_fuel_total", "Fuel units of handler calls: guest code plus the host work charged to it (docs/metering.md).", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Usage.Fuel) }),
	spec("wqhost_handler_wall_seconds_total", "Wall time of handler calls in the guest (docs/metering.md).", prometheus.CounterValue, func(s *BindingStatus) float64 { return s.Usage.WallSeconds }),
	spec("wqhost_handler_host_seconds_total", "Time handler calls spent waiting in host calls (outbound HTTP).", prometheus.CounterValue, func(s *BindingStatus) float64 { return s.Usage.HostSeconds }),
	{name: "wqhost_handler_memory_high_water_bytes", help: "The largest linear memory a handler call of the binding ended with.", kind: prometheus.GaugeValue, val: func(s *BindingStatus) float64 { return float64(s.Usage.MemoryHighWaterBytes) }, perBindingOnly: true},
}

// breakerGauge is the value of wqhost_breaker_state for each state.
var breakerGauge = map[string]float64{"closed": 0, "open": 1, "half-open": 2}

// queueCallNames are the values of wqhost_queue_calls_total's call label.
var queueCallNames = []string{"receive", "empty_receive", "delete", "update", "send", "error", "depth"}

// queueCallValues are q's counts in queueCallNames' order.
func queueCallValues(q QueueCalls) []uint64 {
	return []uint64{q.Receives, q.EmptyReceives, q.Deletes, q.Updates, q.Sends, q.Errors, q.DepthQueries}
}

var (
	tenantRunningDesc = prometheus.NewDesc("wqhost_tenant_running",
		"Handler calls holding one of the tenant's max_concurrency slots.", []string{"tenant"}, nil)
	tenantFuelDesc = prometheus.NewDesc("wqhost_tenant_fuel_total",
		"Fuel units of the tenant's handler calls, over config reloads (docs/metering.md).", []string{"tenant"}, nil)
	// The fuel quota's series, served for tenants with limits.fuel_quota only.
	quotaUsedDesc = prometheus.NewDesc("wqhost_tenant_fuel_quota_used",
		"Fuel the tenant spent in the current quota period.", []string{"tenant"}, nil)
	quotaLimitDesc = prometheus.NewDesc("wqhost_tenant_fuel_quota",
		"The tenant's fuel quota per period (limits.fuel_quota.fuel).", []string{"tenant"}, nil)
	quotaExhaustedDesc = prometheus.NewDesc("wqhost_tenant_fuel_quota_exhausted",
		"1 while the tenant's fuel quota is spent and its bindings lease nothing until the period rolls over.", []string{"tenant"}, nil)
	quotaThrottlesDesc = prometheus.NewDesc("wqhost_tenant_fuel_quota_throttles_total",
		"Lease attempts of the tenant's listeners held back by its spent fuel quota.", []string{"tenant"}, nil)
	readyDesc = prometheus.NewDesc("wqhost_ready", "1 when every binding's module is loaded.", nil, nil)
)

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range m.descs {
		if d != nil {
			ch <- d
		}
	}
	for _, d := range []*prometheus.Desc{m.queueCalls, m.messages, m.module, m.moduleLoaded, m.moduleReloadFailed, configReloadOKDesc, configReloadAtDesc, buildInfoDesc, m.pluginUp,
		m.pluginFallbacks, m.pluginRestarts, tenantRunningDesc, tenantFuelDesc, readyDesc,
		quotaUsedDesc, quotaLimitDesc, quotaExhaustedDesc, quotaThrottlesDesc} {
		ch <- d
	}
	for _, d := range memoryDescs {
		ch <- d
	}
	if m.breakers != nil {
		ch <- m.breakers
	}
}

// Collect implements prometheus.Collector from one Status snapshot: each binding's series,
// or each tenant's sums.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	st := m.h.Status(context.Background())
	ready := 0.0
	if st.Ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
	collectMemory(ch, &st)
	collectReload(ch, &st)
	collectBuild(ch, st.Build)
	for _, t := range st.Tenants {
		ch <- prometheus.MustNewConstMetric(tenantRunningDesc, prometheus.GaugeValue, float64(t.Running), t.Name)
		ch <- prometheus.MustNewConstMetric(tenantFuelDesc, prometheus.CounterValue, float64(t.Usage.Fuel), t.Name)
		if q := t.Quota; q != nil {
			exhausted := 0.0
			if q.Exhausted {
				exhausted = 1
			}
			ch <- prometheus.MustNewConstMetric(quotaUsedDesc, prometheus.GaugeValue, float64(q.Used), t.Name)
			ch <- prometheus.MustNewConstMetric(quotaLimitDesc, prometheus.GaugeValue, float64(q.Fuel), t.Name)
			ch <- prometheus.MustNewConstMetric(quotaExhaustedDesc, prometheus.GaugeValue, exhausted, t.Name)
			ch <- prometheus.MustNewConstMetric(quotaThrottlesDesc, prometheus.CounterValue, float64(q.Throttles), t.Name)
		}
		if !m.perBinding {
			m.collectGroup(ch, []string{t.Name}, t.Bindings)
			m.collectBreakers(ch, t.Name, t.Bindings)
			continue
		}
		for i := range t.Bindings {
			s := &t.Bindings[i]
			m.collectGroup(ch, []string{t.Name, s.Name, s.Queue}, t.Bindings[i:i+1])
		}
	}
}

// collectGroup sends the series of group, one binding or a tenant's bindings, labelled lv:
// counters and gauges summed, digests counted, the latest load time.
func (m *metrics) collectGroup(ch chan<- prometheus.Metric, lv []string, group []BindingStatus) {
	with := func(extra string) []string { return append(slices.Clone(lv), extra) }
	for k, sp := range bindingMetrics {
		if m.descs[k] == nil {
			continue
		}
		sum := 0.0
		for i := range group {
			sum += sp.val(&group[i])
		}
		ch <- prometheus.MustNewConstMetric(m.descs[k], sp.kind, sum, lv...)
	}
	calls := make([]uint64, len(queueCallNames))
	depths := make([]int64, len(depthStates))
	digests := map[string]float64{}
	var loaded time.Time
	type pluginSums struct{ up, fallbacks, restarts float64 }
	plugins := map[string]*pluginSums{}
	for i := range group {
		s := &group[i]
		for k, v := range queueCallValues(s.QueueCalls) {
			calls[k] += v
		}
		for k, v := range depthValues(s.Messages) {
			depths[k] += v
		}
		digests[s.ModuleDigest]++
		if s.ModuleLoadedAt.After(loaded) {
			loaded = s.ModuleLoadedAt
		}
		for _, p := range s.Plugins {
			ps := plugins[p.Policy]
			if ps == nil {
				ps = &pluginSums{}
				plugins[p.Policy] = ps
			}
			if p.Phase == "running" {
				ps.up++
			}
			ps.fallbacks += float64(p.Fallbacks)
			ps.restarts += float64(p.Restarts)
		}
	}
	for k, name := range queueCallNames {
		ch <- prometheus.MustNewConstMetric(m.queueCalls, prometheus.CounterValue, float64(calls[k]), with(name)...)
	}
	for k, state := range depthStates {
		ch <- prometheus.MustNewConstMetric(m.messages, prometheus.GaugeValue, float64(depths[k]), with(state)...)
	}
	for _, d := range slices.Sorted(maps.Keys(digests)) {
		ch <- prometheus.MustNewConstMetric(m.module, prometheus.GaugeValue, digests[d], with(d)...)
	}
	if n := moduleReloadFailed(group); n > 0 {
		ch <- prometheus.MustNewConstMetric(m.moduleReloadFailed, prometheus.GaugeValue, n, lv...)
	}
	if len(group) > 0 {
		ch <- prometheus.MustNewConstMetric(m.moduleLoaded, prometheus.GaugeValue, float64(loaded.UnixNano())/1e9, lv...)
	}
	for _, p := range slices.Sorted(maps.Keys(plugins)) {
		ps := plugins[p]
		ch <- prometheus.MustNewConstMetric(m.pluginUp, prometheus.GaugeValue, ps.up, with(p)...)
		ch <- prometheus.MustNewConstMetric(m.pluginFallbacks, prometheus.CounterValue, ps.fallbacks, with(p)...)
		ch <- prometheus.MustNewConstMetric(m.pluginRestarts, prometheus.CounterValue, ps.restarts, with(p)...)
	}
}

// collectBreakers sends how many of a tenant's bindings are in each circuit breaker state
// (per tenant only: wqhost_breaker_state cannot be summed).
func (m *metrics) collectBreakers(ch chan<- prometheus.Metric, tenant string, group []BindingStatus) {
	counts := map[string]float64{}
	for i := range group {
		counts[group[i].Breaker.State]++
	}
	for _, state := range slices.Sorted(maps.Keys(breakerGauge)) {
		ch <- prometheus.MustNewConstMetric(m.breakers, prometheus.GaugeValue, counts[state], tenant, state)
	}
}
