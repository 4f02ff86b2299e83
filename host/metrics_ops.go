package host

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/wqhost/wqhost/internal/buildinfo"
)

// buildInfoDesc is the binary's build, the usual _build_info gauge (value 1).
var buildInfoDesc = prometheus.NewDesc("wqhost_build_info",
	"The wqhost binary running: its version, commit and Go toolchain (value 1).", []string{"version", "commit", "goversion"}, nil)

// collectBuild sends wqhost_build_info.
func collectBuild(ch chan<- prometheus.Metric, bi buildinfo.Info) {
	ch <- prometheus.MustNewConstMetric(buildInfoDesc, prometheus.GaugeValue, 1, bi.Version, bi.CommitString(), bi.GoVersion)
}

// The reload series an operator alerts on: whether the config file last loaded (Prometheus'
// own names for its config reloads) and which bindings' module reloads are failing.
var (
	configReloadOKDesc = prometheus.NewDesc("wqhost_config_last_reload_successful",
		"1 when the last config reload succeeded (or none was tried since start), 0 while the host runs its previous config because the file failed to load.", nil, nil)
	configReloadAtDesc = prometheus.NewDesc("wqhost_config_last_reload_success_timestamp_seconds",
		"When the config running now was loaded: at start, or by the last reload that succeeded.", nil, nil)
)

// collectReload sends the config reload series of st.
func collectReload(ch chan<- prometheus.Metric, st *Status) {
	ok := 1.0
	if st.LastConfigReloadError != "" {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(configReloadOKDesc, prometheus.GaugeValue, ok)
	ch <- prometheus.MustNewConstMetric(configReloadAtDesc, prometheus.GaugeValue, float64(st.LastConfigReloadSuccessAt.UnixNano())/1e9)
}

// moduleReloadFailed counts the bindings of group whose last module reload was refused (they
// run their previous version). The series is served only while it is above 0, so that it
// adds nothing to the per-binding cardinality of a healthy host.
func moduleReloadFailed(group []BindingStatus) float64 {
	n := 0.0
	for i := range group {
		if group[i].LastReloadError != "" {
			n++
		}
	}
	return n
}
