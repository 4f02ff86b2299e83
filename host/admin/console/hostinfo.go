package console

import (
	"context"
	"time"
)

// HostInfo is what every page shows of the host itself: the binary (version, commit) and,
// while the config file fails to load, why (the host runs its previous config).
type HostInfo struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	// ConfigError is why the last config reload failed; "" when it succeeded.
	ConfigError   string     `json:"config_error,omitempty"`
	ConfigErrorAt *time.Time `json:"config_error_at,omitempty"`
}

func hostInfo(st *status) HostInfo {
	hi := HostInfo{
		Version: st.Build.Version, Commit: short(st.Build.Commit),
		ConfigError: st.LastConfigReloadError, ConfigErrorAt: st.LastConfigReloadErrorAt,
	}
	if st.Build.Modified {
		hi.Commit += "+dirty"
	}
	return hi
}

// hostInfo reads the host's build and config state with s's rights (a one-binding page of
// /v1/status); a failure leaves the header without them rather than failing the page.
func (c *Console) hostInfo(ctx context.Context, s *session) HostInfo {
	var st status
	if err := c.getJSON(ctx, s, "/v1/status?limit=1", &st); err != nil {
		return HostInfo{}
	}
	return hostInfo(&st)
}
