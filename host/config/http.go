package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/wqhost/wqhost/internal/defaults"
	"github.com/wqhost/wqhost/netpolicy"
)

// Bounds of the http: block, checked at load.
const (
	MaxHTTPTimeout         = 10 * time.Minute
	MaxHTTPBodyBytes       = ByteSize(1 << 30)
	MaxHTTPRequestsCap     = 1000
	MaxHTTPRedirectsCap    = 20
	MaxHTTPConcurrencyCap  = 10000
	DefaultHTTPConcurrency = defaults.TenantHTTPRequests
)

// HTTP is a binding's outbound HTTP policy. With no allow rules (the default) every request
// the handler makes is denied.
type HTTP struct {
	// Allow lists URL patterns: scheme://host[:port][/path-prefix]. host is a name,
	// "*.example.com", "*", an IP, or a CIDR in brackets ("[10.0.0.0/8]"); port a number or
	// "*" (default: the scheme's). Loopback, private, link-local, multicast and metadata
	// addresses are reachable only by a URL naming them by IP, through a rule that names
	// them by IP or CIDR: a host name never reaches one.
	Allow []string `koanf:"allow"`
	// Timeout bounds one request, sending to last body byte (default 10s).
	Timeout time.Duration `koanf:"timeout"`
	// MaxRequestBytes bounds a request body (default 1 MiB).
	MaxRequestBytes ByteSize `koanf:"max_request_bytes"`
	// MaxResponseBytes bounds the response body a handler reads (default 4 MiB); the rest is
	// never downloaded.
	MaxResponseBytes ByteSize `koanf:"max_response_bytes"`
	// MaxRequestsPerMessage bounds the requests of one message (default 8).
	MaxRequestsPerMessage int `koanf:"max_requests_per_message"`
	// MaxRedirects bounds the redirects followed per request, each within Allow (default 5;
	// -1 follows none).
	MaxRedirects int `koanf:"max_redirects"`
	// Credentials are secret headers the host adds for the handler, which names them; the
	// handler never sees their values.
	Credentials map[string]HTTPCredential `koanf:"credentials"`
}

// HTTPCredential is a header whose value the host reads from an environment variable and adds
// to requests to Hosts only.
type HTTPCredential struct {
	Header   string   `koanf:"header"`    // e.g. Authorization
	ValueEnv string   `koanf:"value_env"` // the environment variable holding the value
	Hosts    []string `koanf:"hosts"`     // host names or *.suffix patterns it is sent to
}

// Enabled reports whether the binding may make any request.
func (h *HTTP) Enabled() bool { return len(h.Allow) > 0 }

// Rules parses the allow list (validated at load, so errors do not happen on a loaded config).
func (h *HTTP) Rules() (netpolicy.Rules, error) {
	rs := make(netpolicy.Rules, 0, len(h.Allow))
	for i, s := range h.Allow {
		r, err := netpolicy.ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("http.allow[%d]: %w", i, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func validateHTTP(fail failFunc, bp string, h HTTP) {
	p := bp + ".http"
	for i, s := range h.Allow {
		if _, err := netpolicy.ParseRule(s); err != nil {
			fail(fmt.Sprintf("%s.allow[%d]", p, i), "%v", err)
		}
	}
	if h.Timeout < 0 || h.Timeout > MaxHTTPTimeout {
		fail(p+".timeout", "%s is outside 0..%s (0: the default 10s)", h.Timeout, MaxHTTPTimeout)
	}
	if h.MaxRequestBytes < 0 || h.MaxRequestBytes > MaxHTTPBodyBytes {
		fail(p+".max_request_bytes", "%s is outside 0..%s (0: the default 1MiB)", h.MaxRequestBytes, MaxHTTPBodyBytes)
	}
	if h.MaxResponseBytes < 0 || h.MaxResponseBytes > MaxHTTPBodyBytes {
		fail(p+".max_response_bytes", "%s is outside 0..%s (0: the default 4MiB)", h.MaxResponseBytes, MaxHTTPBodyBytes)
	}
	if h.MaxRequestsPerMessage < 0 || h.MaxRequestsPerMessage > MaxHTTPRequestsCap {
		fail(p+".max_requests_per_message", "%d is outside 0..%d (0: the default 8)", h.MaxRequestsPerMessage, MaxHTTPRequestsCap)
	}
	if h.MaxRedirects < -1 || h.MaxRedirects > MaxHTTPRedirectsCap {
		fail(p+".max_redirects", "%d is outside -1..%d (-1: follow none; 0: the default 5)", h.MaxRedirects, MaxHTTPRedirectsCap)
	}
	if len(h.Credentials) > 0 && !h.Enabled() {
		fail(p+".credentials", "credentials without any http.allow rule can never be used")
	}
	for _, name := range slices.Sorted(maps.Keys(h.Credentials)) {
		c := h.Credentials[name]
		cp := p + ".credentials." + name
		if !nameRE.MatchString(name) {
			fail(cp, "credential name %q must be 1-63 lower-case letters, digits, '_' or '-'", name)
		}
		if c.Header == "" || !httpguts.ValidHeaderFieldName(c.Header) {
			fail(cp+".header", "%q is not an HTTP header name", c.Header)
		}
		switch {
		case c.ValueEnv == "":
			fail(cp+".value_env", "required: the environment variable holding the secret")
		case !envRE.MatchString(c.ValueEnv):
			fail(cp+".value_env", "%q is not an environment variable name", c.ValueEnv)
		default:
			if v, ok := os.LookupEnv(c.ValueEnv); !ok || v == "" {
				fail(cp+".value_env", "environment variable %s is not set", c.ValueEnv)
			} else if !httpguts.ValidHeaderFieldValue(v) {
				fail(cp+".value_env", "environment variable %s holds characters a header value cannot (value not shown)", c.ValueEnv)
			}
		}
		if len(c.Hosts) == 0 {
			fail(cp+".hosts", "required: the hosts the credential is sent to")
		}
		for i, host := range c.Hosts {
			if strings.ContainsAny(host, ":/") {
				fail(fmt.Sprintf("%s.hosts[%d]", cp, i), "%q: a host name or *.suffix pattern, without scheme, port or path", host)
				continue
			}
			if _, err := netpolicy.ParseRule("https://" + host); err != nil {
				fail(fmt.Sprintf("%s.hosts[%d]", cp, i), "%v", err)
			}
		}
	}
}

func validateHTTPConcurrency(fail failFunc, tp string, n int) {
	if n < 0 || n > MaxHTTPConcurrencyCap {
		fail(tp+".limits.http_concurrency", "%d is outside 0..%d (0: the default %d)", n, MaxHTTPConcurrencyCap, DefaultHTTPConcurrency)
	}
}
