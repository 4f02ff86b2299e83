// Package http is the outbound HTTP client of the wqhost Go SDK: requests a handler makes
// through the host under its binding's http: policy (docs/abi.md, "Outbound HTTP"). It does
// not use net/http, so it builds with standard Go (GOOS=wasip1) and TinyGo alike.
//
//	resp, err := http.Post(url, body, &http.Options{
//		Headers:    []string{"Content-Type: application/json"},
//		Credential: "hooks", // a header the host adds; the handler never sees its value
//	})
//	if err == nil {
//		err = resp.Check() // a non-2xx status as an *Error
//	}
//	return http.ResultFor(err, time.Minute)
//
// ResultFor maps the outcome to a verdict: 2xx ok; 408, 429 and 5xx retry (after the
// server's Retry-After, bounded); other statuses reject with the status and URL (no query) as
// the poison reason; timeouts and network failures retry; policy refusals reject.
//
// Importing the package declares the wqhost_feature_http_v1 marker the host checks at load.
// Responses are valid during the handler call only: the host closes them when it returns.
package http

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	wqhost "github.com/wqhost/wqhost/sdk/go"
)

// Errors of the outbound HTTP host functions beyond the common wqhost ones (which are
// wqhost.ErrNotFound, ErrDenied, ErrTooLarge, ErrLimit, ErrInvalid).
var (
	// ErrTimeout is ERR_TIMEOUT (-10): no complete response within http.timeout or the
	// message's time limit.
	ErrTimeout = errors.New("wqhost/http: timed out")
	// ErrNetwork is ERR_NETWORK (-11): connecting, TLS or the exchange failed.
	ErrNetwork = errors.New("wqhost/http: network error")
	// ErrStatus marks an *Error made from a response status (see Response.Check).
	ErrStatus = errors.New("wqhost/http: unsuccessful status")
)

func codeError(code int32) error {
	switch code {
	case -1:
		return wqhost.ErrNotFound
	case -2:
		return wqhost.ErrDenied
	case -3:
		return wqhost.ErrTooLarge
	case -4:
		return wqhost.ErrLimit
	case -5:
		return wqhost.ErrInvalid
	case -10:
		return ErrTimeout
	case -11:
		return ErrNetwork
	}
	return errors.New("wqhost/http: unknown host error code " + strconv.Itoa(int(code)))
}

// Options are a request's optional parts.
type Options struct {
	// Headers are "Name: value" lines. Host, Content-Length, Transfer-Encoding and the
	// connection headers are the host's.
	Headers []string
	// Credential names one of the binding's http.credentials; the host adds its header.
	Credential string
	// MaxBody bounds the response body kept in Response.Body (default: all the host
	// delivers, at most the binding's http.max_response_bytes).
	MaxBody int
}

// Response is a completed request.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Body is the response body, up to the host's (or Options.MaxBody's) cap.
	Body []byte
	// Truncated reports that the body went past the cap and the rest was dropped.
	Truncated bool

	method, url string
	handle      int32
}

// Header returns a response header (several values joined by ", "), or "".
func (r *Response) Header(name string) string { return hostHeader(r.handle, name) }

// RetryAfter parses the Retry-After header (seconds or an HTTP date); 0 when absent or
// unparsable.
func (r *Response) RetryAfter() time.Duration {
	return parseRetryAfter(r.Header("Retry-After"), time.Now())
}

// Check returns nil for a 2xx status, else an *Error carrying the status, the URL without
// its query and the server's Retry-After.
func (r *Response) Check() error {
	if r.Status >= 200 && r.Status <= 299 {
		return nil
	}
	return &Error{Method: r.method, URL: r.url, Status: r.Status, RetryAfter: r.RetryAfter(), Err: ErrStatus}
}

// Error is a failed request: refused by the policy, failed on the way, or (from Check)
// answered with an unsuccessful status. Its text never holds the URL's query or a secret.
type Error struct {
	Method string
	URL    string // without user info, query or fragment
	Status int    // the response status; 0 when there was no response
	Err    error  // ErrStatus, ErrTimeout, ErrNetwork or a wqhost.Err* value
	Detail string // the host's explanation (http_error), if any
	// RetryAfter is the server's Retry-After, 0 when it sent none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := "http " + e.Method + " " + e.URL + ": "
	if e.Status != 0 {
		s += "status " + strconv.Itoa(e.Status)
	} else {
		s += e.Err.Error()
	}
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Unwrap returns the cause, for errors.Is.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether trying again later may succeed: 408, 429, 5xx, timeouts and
// network failures. Policy refusals, bad requests and other statuses are not.
func (e *Error) Retryable() bool {
	switch {
	case e.Status == 408 || e.Status == 429 || e.Status >= 500:
		return true
	case e.Status != 0:
		return false
	}
	return errors.Is(e.Err, ErrTimeout) || errors.Is(e.Err, ErrNetwork)
}

// ResultFor maps a request's outcome to the handler's verdict: nil is OK; a retryable
// *Error retries after its Retry-After capped at maxRetryAfter (0 = the binding's back-off);
// any other error rejects, with the error (status and URL, no query) as the poison reason.
func ResultFor(err error, maxRetryAfter time.Duration) wqhost.Result {
	if err == nil {
		return wqhost.OK()
	}
	var e *Error
	if !errors.As(err, &e) {
		return wqhost.Retry(0, err)
	}
	if !e.Retryable() {
		return wqhost.Reject(e)
	}
	after := e.RetryAfter
	if after > maxRetryAfter {
		after = maxRetryAfter
	}
	return wqhost.Retry(after, e)
}

// Get sends a GET request.
func Get(url string, opts *Options) (*Response, error) { return Do("GET", url, nil, opts) }

// Post sends a POST request with body.
func Post(url string, body []byte, opts *Options) (*Response, error) {
	return Do("POST", url, body, opts)
}

// Do sends a request and reads its response. An error means there was no response (refused
// or failed); a response with any status is not an error: use Check.
func Do(method, url string, body []byte, opts *Options) (*Response, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	shown := RedactURL(url)
	// The header lines are joined on the stack when they fit: the host copies them at once.
	var small [512]byte
	hdr := small[:0]
	for i, line := range o.Headers {
		if i > 0 {
			hdr = append(hdr, '\n')
		}
		hdr = append(hdr, line...)
	}
	h := hostRequest(method, url, hdr, body, o.Credential)
	if h < 0 {
		return nil, &Error{Method: method, URL: shown, Err: codeError(h), Detail: hostLastError()}
	}
	r := &Response{Status: int(hostStatus(h)), method: method, url: shown, handle: h}
	// The body is read straight into its own buffer, never through a scratch one to clear and
	// copy from: one allocation for a small body.
	size := 16 << 10
	if o.MaxBody > 0 && o.MaxBody < size {
		// One byte beyond MaxBody tells a body that ends there from a longer one.
		size = o.MaxBody + 1
	}
	got := make([]byte, 0, size)
	for {
		if o.MaxBody > 0 && len(got) >= o.MaxBody {
			r.Truncated = true
			break
		}
		if len(got) == cap(got) {
			got = slices.Grow(got, len(got))
		}
		n := hostBodyRead(h, got[len(got):cap(got)])
		if n == -3 {
			r.Truncated = true
			break
		}
		if n < 0 {
			return nil, &Error{Method: method, URL: shown, Status: 0, Err: codeError(n), Detail: hostLastError()}
		}
		if n == 0 {
			break
		}
		got = got[:len(got)+int(n)]
	}
	if o.MaxBody > 0 && len(got) > o.MaxBody {
		got = got[:o.MaxBody]
	}
	r.Body = got
	return r, nil
}

// RedactURL drops user info, query and fragment: what error texts and poison reasons show.
func RedactURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	if i := strings.Index(u, "://"); i >= 0 {
		rest := u[i+3:]
		end := strings.IndexByte(rest, '/')
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
			u = u[:i+3] + rest[at+1:]
		}
	}
	return u
}

// parseRetryAfter reads delay-seconds or an HTTP date relative to now.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		if n > 365*24*3600 {
			n = 365 * 24 * 3600
		}
		return time.Duration(n) * time.Second
	}
	t, err := time.Parse("Mon, 02 Jan 2006 15:04:05 GMT", v)
	if err != nil {
		return 0
	}
	if d := t.Sub(now); d > 0 {
		return d
	}
	return 0
}
