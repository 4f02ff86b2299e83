package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/wqhost/wqhost/internal/defaults"
	"github.com/wqhost/wqhost/netpolicy"
)

// Return codes of the outbound HTTP host functions beyond the common ones (docs/abi.md).
const (
	errTimeout = -10 // the request ran past http.timeout or the message's time limit
	errNetwork = -11 // connecting, TLS, or the exchange failed
)

// Defaults of an HTTPPolicy's zero fields.
const (
	DefaultHTTPTimeout          = 10 * time.Second
	DefaultHTTPMaxRequestBytes  = 1 << 20
	DefaultHTTPMaxResponseBytes = 4 << 20
	DefaultHTTPMaxRequests      = 8
	DefaultHTTPMaxRedirects     = 5
	// DefaultTenantHTTPRequests caps a tenant's concurrently open outbound requests.
	DefaultTenantHTTPRequests = defaults.TenantHTTPRequests // 64
)

// Bounds the host keeps whatever the policy says.
const (
	maxHTTPErrorText   = 1024     // the text http_error hands back
	maxHTTPHeaderBytes = 64 << 10 // a request's header lines
	maxHTTPURLBytes    = 8 << 10  // a request's URL
)

// HTTPPolicy is a binding's outbound HTTP policy. A pool without one refuses every request.
type HTTPPolicy struct {
	// Allow lists the URLs the guest may request; a request (or redirect) matching none is
	// refused, and special addresses (loopback, private, metadata...) are dialled only when
	// the rule the URL matched names them by IP or CIDR.
	Allow netpolicy.Rules
	// Timeout bounds one request from sending to the last body byte; default 10s. The
	// message's own time limit applies too.
	Timeout time.Duration
	// MaxRequestBytes bounds a request body; default 1 MiB.
	MaxRequestBytes int64
	// MaxResponseBytes bounds the response body the guest can read; the rest is discarded
	// and the read reports ERR_TOO_LARGE. Default 4 MiB.
	MaxResponseBytes int64
	// MaxRequestsPerMessage bounds the requests one message may make; default 8.
	MaxRequestsPerMessage int
	// MaxRedirects bounds the redirects followed per request (each must match Allow); 0 = 5,
	// negative = none followed (the guest sees the 3xx).
	MaxRedirects int
	// Credentials are headers the host adds for the guest, by name; their values are never
	// visible to it.
	Credentials map[string]Credential
}

// Credential is a secret header the host adds to a request when the guest names it and the
// request's host matches Hosts (netpolicy.HostMatch patterns). A redirect to another origin
// (scheme, host or port) loses it.
type Credential struct {
	Header string
	Value  string
	Hosts  []string
}

// HTTPReport is what one message's outbound requests cost.
type HTTPReport struct {
	Requests int           // requests sent (redirects not counted)
	BytesOut int64         // request body bytes
	BytesIn  int64         // response body bytes read by the guest
	Wait     time.Duration // time spent in http_request and http_body_read
}

// Add adds o's counts to r.
func (r *HTTPReport) Add(o HTTPReport) {
	r.Requests += o.Requests
	r.BytesOut += o.BytesOut
	r.BytesIn += o.BytesIn
	r.Wait += o.Wait
}

// httpCounters are a pool's cumulative HTTPReport.
type httpCounters struct {
	requests, out, in, wait atomic.Int64
}

func (c *httpCounters) add(r HTTPReport) {
	if r.Requests == 0 {
		return
	}
	c.requests.Add(int64(r.Requests))
	c.out.Add(r.BytesOut)
	c.in.Add(r.BytesIn)
	c.wait.Add(int64(r.Wait))
}

func (c *httpCounters) load() HTTPReport {
	return HTTPReport{Requests: int(c.requests.Load()), BytesOut: c.out.Load(), BytesIn: c.in.Load(), Wait: time.Duration(c.wait.Load())}
}

// outbound is a pool's HTTP client under its policy. Its requests go through the engine's
// shared Transport (one connection pool for the whole host, capped host-wide); the policy
// travels with each request, never with a connection (see hop).
type outbound struct {
	pol    HTTPPolicy
	tr     http.RoundTripper // the engine's shared Transport
	client *http.Client
	sem    chan struct{} // the tenant's open-request slots
	// resolve, when set by tests, maps a host name to the address dialled in its place (a
	// fake DNS): the dial-time check still sees the address. An address written
	// "public:IP" is dialled as if it were not special, for tests of name rules against a
	// loopback server.
	resolve func(host string) (string, bool)
}

func newOutbound(pol HTTPPolicy, sem chan struct{}, tr http.RoundTripper) *outbound {
	if pol.Timeout <= 0 {
		pol.Timeout = DefaultHTTPTimeout
	}
	if pol.MaxRequestBytes <= 0 {
		pol.MaxRequestBytes = DefaultHTTPMaxRequestBytes
	}
	if pol.MaxResponseBytes <= 0 {
		pol.MaxResponseBytes = DefaultHTTPMaxResponseBytes
	}
	if pol.MaxRequestsPerMessage <= 0 {
		pol.MaxRequestsPerMessage = DefaultHTTPMaxRequests
	}
	if pol.MaxRedirects == 0 {
		pol.MaxRedirects = DefaultHTTPMaxRedirects
	}
	o := &outbound{pol: pol, sem: sem, tr: tr}
	o.client = &http.Client{Transport: o, CheckRedirect: o.checkRedirect}
	return o
}

func (c *Credential) allows(host string) bool {
	for _, p := range c.Hosts {
		if netpolicy.HostMatch(strings.TrimSuffix(strings.ToLower(p), "."), host) {
			return true
		}
	}
	return false
}

func targetOf(u *url.URL) netpolicy.Target {
	t := netpolicy.Target{Scheme: strings.ToLower(u.Scheme), Host: strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), Path: u.Path}
	if p := u.Port(); p != "" {
		t.Port, _ = strconv.Atoi(p)
	} else if t.Scheme == "https" {
		t.Port = 443
	} else {
		t.Port = 80
	}
	return t
}

// redactURL is a URL for logs and errors: no user info, query or fragment.
func redactURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = nil, "", false, "", ""
	return c.String()
}

// httpResp is an open response, a handle's target.
type httpResp struct {
	ctx  context.Context // the request's: http.timeout and the message's time limit
	resp *http.Response
	body io.ReadCloser
	read int64
	over bool // the body went past MaxResponseBytes
	// overErr is the reason given once over: every later read returns ERR_TOO_LARGE with it.
	overErr string
	done    bool // the body ended
	cancel  context.CancelFunc
	sem     chan struct{} // the tenant slot to give back; nil once given
}

func (h *httpResp) close() {
	if h.body != nil {
		_ = h.body.Close()
		h.body = nil
	}
	h.cancel()
	if h.sem != nil {
		<-h.sem
		h.sem = nil
	}
}

// httpState is one message's outbound requests.
type httpState struct {
	open    []*httpResp // handle i+1; nil once closed
	report  HTTPReport
	lastErr string
	// refused counts the policy refusals of the call: the first is logged, the rest are
	// summed up in one line when the call ends, so a guest refused in a loop cannot flood
	// the log.
	refused int
}

// used reports whether the call touched outbound HTTP, so closeHTTP has work: most calls
// make no request.
func (h *httpState) used() bool {
	return len(h.open) != 0 || h.report != (HTTPReport{}) || h.lastErr != "" || h.refused != 0
}

// closeHTTP ends every request the message left open; the pool calls it after each call.
func (st *callState) closeHTTP() HTTPReport {
	for _, h := range st.http.open {
		if h != nil {
			h.close()
		}
	}
	clear(st.http.open)
	rep := st.http.report
	if st.http.refused > 1 && st.pool != nil {
		st.pool.logger.Warn("outbound http requests refused, more than the one logged", st.callee().logAttrs("more", st.http.refused-1)...)
	}
	st.http.open, st.http.report, st.http.lastErr, st.http.refused = st.http.open[:0], HTTPReport{}, "", 0
	return rep
}

// fail records the reason of a refused or failed request for http_error and, for policy
// refusals, logs it naming the rule.
func (st *callState) httpFail(code int32, method string, shown func() string, rule, msg string) int32 {
	u := shown()
	if st.pool != nil && st.pool.httpc != nil {
		for _, c := range st.pool.httpc.pol.Credentials {
			if c.Value != "" {
				u = strings.ReplaceAll(u, c.Value, "[redacted]")
				msg = strings.ReplaceAll(msg, c.Value, "[redacted]")
			}
		}
	}
	text := "http: " + method + " " + u + ": " + msg
	if len(text) > maxHTTPErrorText {
		text = text[:maxHTTPErrorText]
	}
	st.http.lastErr = text
	if rule != "" && st.pool != nil {
		if st.http.refused++; st.http.refused > 1 {
			return code
		}
		st.pool.logger.Warn("outbound http request refused", st.callee().logAttrs("method", method, "url", u, "rule", rule, "reason", msg)...)
	}
	return code
}

var forbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Upgrade": true,
	"Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Authorization": true, "Proxy-Connection": true,
}

// parseHeaders reads "Name: value" lines (LF or CRLF). The values share one backing array
// and the map is sized for the lines: a request's headers cost three allocations, not one per
// line.
func parseHeaders(b []byte) (http.Header, error) {
	if len(b) == 0 {
		return make(http.Header), nil
	}
	lines := bytes.Count(b, []byte{'\n'}) + 1
	h := make(http.Header, lines)
	vals := make([]string, 0, lines)
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		if !ok || !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidHeaderFieldValue(value) {
			return nil, fmt.Errorf("malformed header line %q", clip(line, 80))
		}
		name = http.CanonicalHeaderKey(name)
		if forbiddenHeaders[name] {
			return nil, fmt.Errorf("header %s is set by the host", name)
		}
		if prev, ok := h[name]; ok {
			// A repeated name gets its own slice, so appending never writes into the next
			// name's value.
			h[name] = append(prev[:len(prev):len(prev)], value)
			continue
		}
		vals = append(vals, value)
		h[name] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	return h, nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// request sends one request for the guest and returns its handle or an error code.
func (st *callState) request(ctx context.Context, method, rawURL string, hdr, body []byte, credName string) int32 {
	u, perr := url.Parse(rawURL)
	if perr != nil {
		u = nil
	}
	// The URL as logs and errors show it, worked out only when one is written.
	shown := func() string {
		if u == nil {
			return clip(rawURL, 200)
		}
		return redactURL(u)
	}
	if st.out == nil {
		return st.httpFail(errDenied, method, shown, "", "no message is being handled (self test)")
	}
	p := st.pool
	o := p.httpc
	if o == nil {
		return st.httpFail(errDenied, method, shown, "http", "the binding has no http: policy (outbound requests are denied by default)")
	}
	if st.http.report.Requests >= o.pol.MaxRequestsPerMessage {
		return st.httpFail(errLimit, method, shown, "http.max_requests_per_message", fmt.Sprintf("more than %d requests for one message", o.pol.MaxRequestsPerMessage))
	}
	if len(hdr) > maxHTTPHeaderBytes || len(rawURL) > maxHTTPURLBytes {
		return st.httpFail(errTooLarge, method, shown, "", fmt.Sprintf("URL (%d bytes) or header lines (%d bytes) over the host's bounds (%d, %d)", len(rawURL), len(hdr), maxHTTPURLBytes, maxHTTPHeaderBytes))
	}
	if int64(len(body)) > o.pol.MaxRequestBytes {
		return st.httpFail(errTooLarge, method, shown, "http.max_request_bytes", fmt.Sprintf("body of %d bytes exceeds %d", len(body), o.pol.MaxRequestBytes))
	}
	if method == "" {
		method = http.MethodGet
	}
	if !httpguts.ValidHeaderFieldName(method) || strings.ToUpper(method) != method {
		return st.httpFail(errInvalid, clip(method, 20), shown, "", "invalid method")
	}
	if u == nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return st.httpFail(errInvalid, method, shown, "", "want an absolute http or https URL")
	}
	if u.User != nil {
		return st.httpFail(errInvalid, method, shown, "", "user info in URLs is not allowed (use a credential)")
	}
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg == "." || seg == ".." {
			return st.httpFail(errInvalid, method, shown, "", "dot segments in the path are not allowed")
		}
	}
	tg := targetOf(u)
	rule, ok := o.pol.Allow.Match(tg)
	if !ok {
		return st.httpFail(errDenied, method, shown, "http.allow", "no http.allow rule matches")
	}
	h, err := parseHeaders(hdr)
	if err != nil {
		return st.httpFail(errInvalid, method, shown, "", err.Error())
	}
	var cred *Credential
	if credName != "" {
		c, ok := o.pol.Credentials[credName]
		if !ok {
			return st.httpFail(errNotFound, method, shown, "http.credentials", "no credential named "+clip(credName, 64))
		}
		if !c.allows(tg.Host) {
			return st.httpFail(errDenied, method, shown, "http.credentials."+credName+".hosts", "credential "+credName+" is not bound to host "+tg.Host)
		}
		cred = &c
		h.Set(c.Header, c.Value)
	}

	start := time.Now()
	defer func() { st.http.report.Wait += time.Since(start) }()
	tctx, cancel := context.WithTimeout(ctx, o.pol.Timeout)
	// The hop of the guest's own URL, matched above: RoundTrip does not match it again.
	rctx := context.WithValue(tctx, hopKey{}, &hop{rule: rule, url: u, cred: cred, timeout: o.pol.Timeout, resolve: o.resolve})
	select {
	case o.sem <- struct{}{}:
	case <-rctx.Done():
		cancel()
		return st.httpFail(errTimeout, method, shown, "limits.http_concurrency", "timed out waiting for one of the tenant's open-request slots")
	}
	// The body is copied: guest memory may move (memory.grow) while the transport still
	// reads it.
	req := (&http.Request{
		Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Host: u.Host, Body: http.NoBody,
	}).WithContext(rctx)
	if len(body) > 0 {
		cp := bytes.Clone(body)
		req.ContentLength = int64(len(cp))
		req.Body = io.NopCloser(bytes.NewReader(cp))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(cp)), nil }
	}
	st.http.report.Requests++
	st.http.report.BytesOut += int64(len(body))
	resp, err := o.client.Do(req)
	if err != nil {
		// Whether the request's time ran out, asked before cancel() ends its context anyway.
		ended := rctx.Err() != nil
		<-o.sem
		cancel()
		var ad *addrDenied
		var rd *redirectDenied
		switch {
		case errors.As(err, &ad):
			return st.httpFail(errDenied, method, shown, "http.allow (address)", ad.Error())
		case errors.As(err, &rd):
			return st.httpFail(errDenied, method, shown, "http.allow (redirect)", rd.msg)
		case ended || errors.Is(err, context.DeadlineExceeded):
			if ctx.Err() != nil {
				return st.httpFail(errTimeout, method, shown, "", "the message's time limit ended the request")
			}
			return st.httpFail(errTimeout, method, shown, "", fmt.Sprintf("no complete response within http.timeout (%s)", o.pol.Timeout))
		default:
			var ue *url.Error
			msg := err.Error()
			if errors.As(err, &ue) {
				msg = ue.Err.Error()
			}
			return st.httpFail(errNetwork, method, shown, "", msg)
		}
	}
	hr := &httpResp{ctx: rctx, resp: resp, body: resp.Body, cancel: cancel, sem: o.sem}
	for i, x := range st.http.open {
		if x == nil {
			st.http.open[i] = hr
			return int32(i + 1)
		}
	}
	st.http.open = append(st.http.open, hr)
	return int32(len(st.http.open))
}

func (st *callState) handle(h uint32) *httpResp {
	if h == 0 || int(h) > len(st.http.open) {
		return nil
	}
	return st.http.open[h-1]
}

// readBody copies the next body bytes into dst: the count, 0 at the end, ERR_TOO_LARGE once
// the cap is passed (the rest is never read), or a timeout/network error.
func (st *callState) readBody(ctx context.Context, hr *httpResp, dst []byte) int32 {
	if hr.over {
		// The reason again: http_error (or Extism's http_request, which fails the call with
		// it) must name the cap, however many reads came between.
		st.http.lastErr = hr.overErr
		return errTooLarge
	}
	if hr.done || len(dst) == 0 {
		return 0
	}
	start := time.Now()
	defer func() { st.http.report.Wait += time.Since(start) }()
	max := st.pool.httpc.pol.MaxResponseBytes
	n := 0
	var err error
	for n < len(dst) && err == nil {
		var k int
		k, err = hr.body.Read(dst[n:])
		n += k
		if hr.read+int64(n) > max {
			break
		}
	}
	if hr.read+int64(n) > max {
		n = int(max - hr.read)
		hr.over = true
		// Close now: the remainder is never downloaded.
		_ = hr.body.Close()
		hr.body = nil
		// The reason is recorded (and the refusal logged) when the cap is passed, though this
		// read still delivers the bytes up to it: the next read returns ERR_TOO_LARGE with it.
		rc := st.httpFail(errTooLarge, hr.resp.Request.Method, func() string { return redactURL(hr.resp.Request.URL) }, "http.max_response_bytes", fmt.Sprintf("response body exceeds http.max_response_bytes (%d bytes)", max))
		hr.overErr = st.http.lastErr
		if n == 0 {
			return rc
		}
	}
	hr.read += int64(n)
	st.http.report.BytesIn += int64(n)
	if err != nil && !hr.over {
		if err != io.EOF {
			method, shown := hr.resp.Request.Method, func() string { return redactURL(hr.resp.Request.URL) }
			if n > 0 {
				// Deliver what arrived; the error comes with the next read.
				return int32(n)
			}
			hr.done = true
			if ctx.Err() != nil || hr.ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				return st.httpFail(errTimeout, method, shown, "", "the response body did not finish in time")
			}
			return st.httpFail(errNetwork, method, shown, "", "reading the response body: "+err.Error())
		}
		hr.done = true
	}
	return int32(n)
}
