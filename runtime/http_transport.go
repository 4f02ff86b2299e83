package runtime

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/wqhost/wqhost/netpolicy"
)

// The transport side of outbound HTTP: the engine's one Transport, the dial check, and what
// each hop (the guest's request, every redirect) carries of its binding's policy.

// hop is what the dial of one request (the guest's or a redirect's) needs from the policy:
// the rule its URL matched, which alone may allow a special address.
type hop struct {
	rule *netpolicy.Rule
	// url is the URL rule was matched for: RoundTrip takes the hop request made for the
	// guest's own URL as it is, and matches every other URL (a redirect's) afresh.
	url     *url.URL
	cred    *Credential // the guest's credential, on the guest's request's hop
	timeout time.Duration
	resolve func(host string) (string, bool)
	public  bool // set by dial for a test address written "public:IP"
}

type hopKey struct{}

// addrDenied is a dial refused because the resolved address is special.
type addrDenied struct {
	addr   netip.AddrPort
	reason string
	rule   string
}

func (e *addrDenied) Error() string {
	return fmt.Sprintf("address %s is %s and the http.allow rule the URL matched (%s) does not name it by IP", e.addr, e.reason, e.rule)
}

// redirectDenied is a redirect the policy does not allow.
type redirectDenied struct{ msg string }

func (e *redirectDenied) Error() string { return e.msg }

// Bounds of the shared connection pool.
const (
	// maxIdle and maxIdlePerHost bound the idle connections of the whole host, all tenants
	// and bindings together (in all, and per scheme://host:port).
	maxIdle        = 128
	maxIdlePerHost = 16
	// idleTimeout closes a connection unused this long.
	idleTimeout = 90 * time.Second
	// tlsHandshakeTimeout bounds a TLS handshake, which runs detached from the request that
	// asked for it (its connection may serve the next one).
	tlsHandshakeTimeout = 10 * time.Second
)

// newHTTPTransport is the engine's one outbound Transport. Its dials are checked against the
// rule of the request that asked for them (hop, carried in the dial's context), in
// Dialer.ControlContext, just before connecting: the standard guard against a name that
// resolves, or re-resolves, to an address it must not reach.
func newHTTPTransport() *http.Transport {
	return &http.Transport{
		// Never a proxy from the environment: the dial check must see the real target.
		Proxy:                  nil,
		DialContext:            dialHop,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		MaxIdleConns:           maxIdle,
		MaxIdleConnsPerHost:    maxIdlePerHost,
		IdleConnTimeout:        idleTimeout,
		TLSHandshakeTimeout:    tlsHandshakeTimeout,
		MaxResponseHeaderBytes: maxHTTPHeaderBytes,
		// The guest sees the bytes the server sent; no transparent gunzip behind its caps.
		DisableCompression: true,
	}
}

// dialHop dials for a request under the hop its context carries; without one it refuses, so
// nothing reaches the network unpoliced.
func dialHop(ctx context.Context, network, addr string) (net.Conn, error) {
	h, _ := ctx.Value(hopKey{}).(*hop)
	if h == nil {
		return nil, fmt.Errorf("outbound http: dial %s without a policy", addr)
	}
	if h.resolve != nil {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			if ip, ok := h.resolve(host); ok {
				if ip, ok = strings.CutPrefix(ip, "public:"); ok {
					c := *h
					c.public = true
					ctx = context.WithValue(ctx, hopKey{}, &c)
				}
				addr = net.JoinHostPort(ip, port)
			}
		}
	}
	d := net.Dialer{Timeout: h.timeout, ControlContext: controlHop}
	return d.DialContext(ctx, network, addr)
}

// controlHop runs on every resolved address just before connecting, so a name that resolves
// (or re-resolves, or redirects) to a special address is refused whatever the URL said; only
// the rule the request's URL matched can allow one, by naming it by IP.
func controlHop(ctx context.Context, network, address string, _ syscall.RawConn) error {
	h, _ := ctx.Value(hopKey{}).(*hop)
	ap, err := netip.ParseAddrPort(address)
	if err != nil || h == nil {
		return fmt.Errorf("outbound http: dial %s: unparsable address or no policy", address)
	}
	if reason, bad := netpolicy.Special(ap.Addr()); bad && !h.public && !h.rule.AllowsAddr(ap) {
		return &addrDenied{addr: ap, reason: reason, rule: h.rule.Raw}
	}
	return nil
}

// RoundTrip sends one hop (the guest's request or a redirect) with the rule its own URL
// matches in its context, for the dial check. The guest's request arrives with its hop
// already (request matched its URL); a redirect carries that context too, with another URL,
// so it is matched here.
func (o *outbound) RoundTrip(req *http.Request) (*http.Response, error) {
	if h, ok := req.Context().Value(hopKey{}).(*hop); ok && h.url == req.URL {
		return o.tr.RoundTrip(req)
	}
	r, ok := o.pol.Allow.Match(targetOf(req.URL))
	if !ok {
		// request and checkRedirect refuse these first; this keeps the dial from ever
		// running without a rule.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &redirectDenied{msg: redactURL(req.URL) + " matches no http.allow rule"}
	}
	ctx := context.WithValue(req.Context(), hopKey{}, &hop{rule: r, url: req.URL, timeout: o.pol.Timeout, resolve: o.resolve})
	return o.tr.RoundTrip(req.WithContext(ctx))
}

// sensitiveHeaders are dropped from a redirect to another origin, like the credential.
var sensitiveHeaders = []string{"Authorization", "Www-Authenticate", "Cookie", "Cookie2", "Proxy-Authorization"}

// checkRedirect lets a redirect through when it matches a rule (its dial is then checked
// against that rule), sends no Referer, and keeps the credential and the guest's own
// authorization headers only on the origin (scheme, host and port) of the first request: a
// downgrade to http or a move to another port loses them.
func (o *outbound) checkRedirect(req *http.Request, via []*http.Request) error {
	if o.pol.MaxRedirects < 0 {
		return http.ErrUseLastResponse
	}
	if len(via) > o.pol.MaxRedirects {
		return &redirectDenied{msg: fmt.Sprintf("more than %d redirects (http.max_redirects)", o.pol.MaxRedirects)}
	}
	if _, ok := o.pol.Allow.Match(targetOf(req.URL)); !ok {
		return &redirectDenied{msg: "redirect to " + redactURL(req.URL) + " matches no http.allow rule"}
	}
	// http.Client sets it to the previous URL, query included.
	req.Header.Del("Referer")
	if originOf(req.URL) != originOf(via[0].URL) {
		// A redirect's context is the guest's request's, whose hop holds the credential.
		if h, ok := req.Context().Value(hopKey{}).(*hop); ok && h.cred != nil {
			req.Header.Del(h.cred.Header)
		}
		for _, h := range sensitiveHeaders {
			req.Header.Del(h)
		}
	}
	return nil
}

// origin is a target's scheme, host and port.
type origin struct {
	scheme, host string
	port         int
}

func originOf(u *url.URL) origin {
	t := targetOf(u)
	return origin{t.Scheme, t.Host, t.Port}
}
