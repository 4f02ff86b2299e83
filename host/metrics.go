package host

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics is the host's own Prometheus registry. Counters and gauges are read from the
// listeners, pools and plugins at scrape time (one source of truth with /v1/status); the
// handler latency histogram is observed per call.
type metrics struct {
	h       *Host
	reg     *prometheus.Registry
	latency *prometheus.HistogramVec
}

var bindingLabels = []string{"tenant", "binding", "queue"}

func newMetrics(h *Host) *metrics {
	m := &metrics{h: h, reg: prometheus.NewRegistry()}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "wqhost_handler_duration_seconds",
		Help:    "Wall time of handler calls (module execution), by binding.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10), // 100µs .. ~26s
	}, bindingLabels)
	m.reg.MustRegister(m.latency, m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

type desc struct {
	d    *prometheus.Desc
	kind prometheus.ValueType
	val  func(s *BindingStatus) float64
}

func bdesc(name, help string, kind prometheus.ValueType, val func(s *BindingStatus) float64) desc {
	return desc{prometheus.NewDesc(name, help, bindingLabels, nil), kind, val}
}

var (
	bindingDescs = []desc{
		bdesc("wqhost_messages_processed_total", "Messages handled successfully and deleted.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Processed) }),
		bdesc("wqhost_messages_failed_total", "Failed handler calls (each failure of each delivery).", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Failed) }),
		bdesc("wqhost_messages_retried_total", "Failed messages released for a later retry.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Retried) }),
		bdesc("wqhost_messages_poisoned_total", "Messages moved to the <queue>-poison queue.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Poisoned) }),
		bdesc("wqhost_queue_depth", "Approximate messages in the input queue, leased ones included.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Depth) }),
		bdesc("wqhost_dead_letter_depth", "Messages in the binding's <queue>-poison queue.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.DeadLetterDepth) }),
		bdesc("wqhost_workers", "Dequeue workers running.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Workers) }),
		bdesc("wqhost_helper_workers_total", "Workers started to receive while a slow message held its batch's worker.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.HelperWorkers) }),
		bdesc("wqhost_in_flight", "Handler calls running.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.InFlight) }),
		bdesc("wqhost_leased", "Messages leased and not yet through their handler call (at most pool max_instances plus as many prefetched).", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Leased) }),
		bdesc("wqhost_leased_idle", "Messages leased and not started yet.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.LeasedIdle) }),
		bdesc("wqhost_leases_lost_total", "Messages whose lease ran out before they were settled (they are redelivered).", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.LeasesLost) }),
		bdesc("wqhost_pool_instances", "Live module instances in the binding's pool.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Pool.Instances) }),
		bdesc("wqhost_pool_instances_busy", "Module instances running a call.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Pool.Busy) }),
		bdesc("wqhost_pool_traps_total", "Handler calls that trapped.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Pool.Traps) }),
		bdesc("wqhost_http_requests_total", "Outbound HTTP requests sent by the binding's handlers.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.HTTP.Requests) }),
		bdesc("wqhost_http_sent_bytes_total", "Outbound HTTP request body bytes.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.HTTP.BytesOut) }),
		bdesc("wqhost_http_received_bytes_total", "Outbound HTTP response body bytes read by handlers.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.HTTP.BytesIn) }),
		bdesc("wqhost_http_wait_seconds_total", "Time handlers spent waiting on outbound HTTP.", prometheus.CounterValue, func(s *BindingStatus) float64 { return s.HTTP.WaitSeconds }),
		bdesc("wqhost_binding_running", "Handler calls of the binding holding a slot.", prometheus.GaugeValue, func(s *BindingStatus) float64 { return float64(s.Running) }),
		bdesc("wqhost_breaker_state", "The binding's circuit breaker: 0 closed, 1 open (leasing nothing), 2 half-open (probing one message at a time).", prometheus.GaugeValue, func(s *BindingStatus) float64 { return breakerGauge[s.Breaker.State] }),
		bdesc("wqhost_breaker_trips_total", "Times the binding's circuit breaker opened.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Breaker.Trips) }),
		bdesc("wqhost_pool_timeouts_total", "Handler calls that exceeded the time limit.", prometheus.CounterValue, func(s *BindingStatus) float64 { return float64(s.Pool.Timeouts) }),
	}
	queueCallsDesc = prometheus.NewDesc("wqhost_queue_calls_total",
		"Backend calls made by the listener (the whitepaper's cost model), by call.", append(bindingLabels, "call"), nil)
	moduleDesc = prometheus.NewDesc("wqhost_module_info",
		"The module version a binding runs (value 1), with its sha256 digest.", append(bindingLabels, "digest"), nil)
	moduleLoadedDesc = prometheus.NewDesc("wqhost_module_loaded_timestamp_seconds",
		"When the binding's module version was loaded.", bindingLabels, nil)
	pluginUpDesc = prometheus.NewDesc("wqhost_plugin_up",
		"1 while the binding's policy plugin runs, 0 while the built-in fallback answers.", append(bindingLabels, "policy"), nil)
	pluginFallbacksDesc = prometheus.NewDesc("wqhost_plugin_fallbacks_total",
		"Policy decisions answered by the built-in fallback instead of the plugin.", append(bindingLabels, "policy"), nil)
	pluginRestartsDesc = prometheus.NewDesc("wqhost_plugin_restarts_total",
		"Restarts of the binding's policy plugin after a crash.", append(bindingLabels, "policy"), nil)
	tenantRunningDesc = prometheus.NewDesc("wqhost_tenant_running",
		"Handler calls holding one of the tenant's max_concurrency slots.", []string{"tenant"}, nil)
	readyDesc = prometheus.NewDesc("wqhost_ready", "1 when every binding's module is loaded.", nil, nil)
)

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range bindingDescs {
		ch <- d.d
	}
	for _, d := range []*prometheus.Desc{queueCallsDesc, moduleDesc, moduleLoadedDesc, pluginUpDesc,
		pluginFallbacksDesc, pluginRestartsDesc, tenantRunningDesc, readyDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector from one Status snapshot.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	st := m.h.Status(context.Background())
	ready := 0.0
	if st.Ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
	for _, t := range st.Tenants {
		ch <- prometheus.MustNewConstMetric(tenantRunningDesc, prometheus.GaugeValue, float64(t.Running), t.Name)
		for i := range t.Bindings {
			s := &t.Bindings[i]
			lv := []string{t.Name, s.Name, s.Queue}
			for _, d := range bindingDescs {
				ch <- prometheus.MustNewConstMetric(d.d, d.kind, d.val(s), lv...)
			}
			for call, v := range map[string]uint64{
				"receive": s.QueueCalls.Receives, "empty_receive": s.QueueCalls.EmptyReceives,
				"delete": s.QueueCalls.Deletes, "update": s.QueueCalls.Updates,
				"send": s.QueueCalls.Sends, "error": s.QueueCalls.Errors, "depth": s.QueueCalls.DepthQueries,
			} {
				ch <- prometheus.MustNewConstMetric(queueCallsDesc, prometheus.CounterValue, float64(v), append(lv, call)...)
			}
			ch <- prometheus.MustNewConstMetric(moduleDesc, prometheus.GaugeValue, 1, append(lv, s.ModuleDigest)...)
			ch <- prometheus.MustNewConstMetric(moduleLoadedDesc, prometheus.GaugeValue, float64(s.ModuleLoadedAt.UnixNano())/1e9, lv...)
			for _, p := range s.Plugins {
				up := 0.0
				if p.Phase == "running" {
					up = 1
				}
				plv := append(append([]string(nil), lv...), p.Policy)
				ch <- prometheus.MustNewConstMetric(pluginUpDesc, prometheus.GaugeValue, up, plv...)
				ch <- prometheus.MustNewConstMetric(pluginFallbacksDesc, prometheus.CounterValue, float64(p.Fallbacks), plv...)
				ch <- prometheus.MustNewConstMetric(pluginRestartsDesc, prometheus.CounterValue, float64(p.Restarts), plv...)
			}
		}
	}
}
