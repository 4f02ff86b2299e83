package host

import (
	"os"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/runtime"
)

// HTTPStatus is a binding's outbound HTTP, summed over its messages.
type HTTPStatus struct {
	Requests    int64   `json:"requests"`
	BytesOut    int64   `json:"bytes_out"`
	BytesIn     int64   `json:"bytes_in"`
	WaitSeconds float64 `json:"wait_seconds"`
}

func httpStatus(cur, retired runtime.HTTPReport) HTTPStatus {
	cur.Add(retired)
	return HTTPStatus{Requests: int64(cur.Requests), BytesOut: cur.BytesOut, BytesIn: cur.BytesIn, WaitSeconds: cur.Wait.Seconds()}
}

// httpPolicy turns a binding's http: block into the runtime's policy, reading credential
// values from the environment; nil (every request denied) without allow rules. The block was
// validated at load, rules and all.
func httpPolicy(h config.HTTP) *runtime.HTTPPolicy {
	if !h.Enabled() {
		return nil
	}
	rules, err := h.Rules()
	if err != nil {
		// Unreachable for a validated config; deny rather than half-allow.
		return nil
	}
	p := &runtime.HTTPPolicy{
		Allow: rules, Timeout: h.Timeout,
		MaxRequestBytes: int64(h.MaxRequestBytes), MaxResponseBytes: int64(h.MaxResponseBytes),
		MaxRequestsPerMessage: h.MaxRequestsPerMessage, MaxRedirects: h.MaxRedirects,
	}
	if len(h.Credentials) > 0 {
		p.Credentials = make(map[string]runtime.Credential, len(h.Credentials))
		for name, c := range h.Credentials {
			p.Credentials[name] = runtime.Credential{Header: c.Header, Value: os.Getenv(c.ValueEnv), Hosts: c.Hosts}
		}
	}
	return p
}
