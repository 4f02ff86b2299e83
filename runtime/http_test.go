package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/netpolicy"
)

const httpGuestPath = "testdata/httpguest/httpguest.wasm"

func rules(t testing.TB, ss ...string) netpolicy.Rules {
	t.Helper()
	var rs netpolicy.Rules
	for _, s := range ss {
		r, err := netpolicy.ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// httpPool is a pool of the httpguest fixture with pol (nil: no policy), logging to the
// returned buffer, and hosts as its fake DNS (name -> IP).
func httpPool(t testing.TB, cfg PoolConfig, pol *HTTPPolicy, hosts map[string]string) (*Pool, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	e := engineLoggingTo(t, buf)
	ten, err := e.Tenant("acme", TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	cfg.OutputQueue, cfg.HTTP = "out", pol
	if cfg.Binding == "" {
		cfg.Binding = "hooks"
	}
	p, err := ten.NewPool(context.Background(), load(t, e, httpGuestPath, ABIWqhostV1), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p.httpc != nil && hosts != nil {
		p.httpc.resolve = func(h string) (string, bool) { ip, ok := hosts[h]; return ip, ok }
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p, buf
}

// script runs one httpguest script and returns the emitted line (status ok) or the reason
// (status retry).
func script(t testing.TB, p *Pool, s string) (string, *Result) {
	t.Helper()
	out, err := p.Call(context.Background(), &Input{ID: "m-1", Body: []byte(s)})
	if err != nil {
		t.Fatalf("call %q: %v", s, err)
	}
	switch out.Verdict {
	case VerdictOK:
		if len(out.Outputs) != 1 {
			t.Fatalf("call %q: %d outputs", s, len(out.Outputs))
		}
		return string(out.Outputs[0].Body), out
	case VerdictRetry:
		return out.ErrorText, out
	}
	t.Fatalf("call %q: status %d: %s", s, out.Verdict, out.ErrorText)
	return "", nil
}

func hostPort(t testing.TB, srv *httptest.Server) (string, string) {
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port()
}

func TestHTTPSuccessAndReport(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type") + " " + string(b))
		w.Header().Set("Retry-After", "7")
		fmt.Fprint(w, "accepted")
	}))
	defer srv.Close()
	p, _ := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*/hooks")}, nil)
	line, out := script(t, p, "POST "+srv.URL+"/hooks/1?token=abc - 5\nContent-Type: application/json\n\n{\"a\":1}")
	if want := "status=200 code=0 read=8 retry-after=7 body=accepted"; line != want {
		t.Errorf("guest saw %q, want %q", line, want)
	}
	if g := got.Load(); g != `POST /hooks/1 application/json {"a":1}` {
		t.Errorf("server got %q", g)
	}
	if r := out.HTTP; r.Requests != 1 || r.BytesOut != 7 || r.BytesIn != 8 || r.Wait <= 0 {
		t.Errorf("report %+v, want 1 request, 7 bytes out, 8 in, some wait", r)
	}
}

func TestHTTPRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	_, port := hostPort(t, srv)
	allowHooks := &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*/hooks"), MaxRequestBytes: 4}
	for _, tt := range []struct {
		name   string
		pol    *HTTPPolicy
		script string
		want   []string // in the reason
		rule   string   // in the log line; "" = none
	}{
		{"no policy", nil, "GET " + srv.URL + "/hooks", []string{"code=-2", "no http: policy"}, "rule=http "},
		{"path outside", allowHooks, "GET " + srv.URL + "/admin", []string{"code=-2", "no http.allow rule matches"}, "rule=http.allow"},
		{"dot segments", allowHooks, "GET " + srv.URL + "/hooks/../admin", []string{"code=-5", "dot segments"}, ""},
		{"body too large", allowHooks, "POST " + srv.URL + "/hooks\n\n12345", []string{"code=-3", "exceeds 4"}, "rule=http.max_request_bytes"},
		{"host header", allowHooks, "GET " + srv.URL + "/hooks\nHost: evil", []string{"code=-5", "Host is set by the host"}, ""},
		{"localhost by name only", &HTTPPolicy{Allow: rules(t, "http://localhost:*")}, "GET http://localhost:" + port + "/", []string{"code=-2", "127.0.0.1:" + port + " is loopback"}, `rule="http.allow (address)"`},
		{"unknown credential", allowHooks, "GET " + srv.URL + "/hooks nope", []string{"code=-1", "no credential named nope"}, "rule=http.credentials"},
		{"huge headers", allowHooks, "GET " + srv.URL + "/hooks\nX-Big: " + strings.Repeat("a", 70<<10), []string{"code=-3", "header lines"}, ""},
		{"user info", allowHooks, "GET http://u:pw@127.0.0.1:" + port + "/hooks", []string{"code=-5", "user info"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, logs := httpPool(t, PoolConfig{}, tt.pol, nil)
			reason, out := script(t, p, tt.script)
			if out.Verdict != VerdictRetry {
				t.Fatalf("status %d (%s), want the guest's retry on a refused request", out.Verdict, reason)
			}
			for _, w := range tt.want {
				if !strings.Contains(reason, w) {
					t.Errorf("reason %q lacks %q", reason, w)
				}
			}
			if strings.Contains(reason, "pw") {
				t.Errorf("reason %q shows the URL's password", reason)
			}
			if tt.rule != "" && !strings.Contains(logs.String(), tt.rule) {
				t.Errorf("log lacks %q:\n%s", tt.rule, logs)
			}
		})
	}
}

// TestHTTPSpecialAddressesRefusedAtDial: a name the allow list accepts but that resolves to a
// metadata or loopback address (in any spelling) is refused when dialling, and nothing
// connects; the same address named by an IP rule is reachable.
func TestHTTPSpecialAddressesRefusedAtDial(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port := hostPort(t, srv)
	hosts := map[string]string{
		"metadata.test": "169.254.169.254", "mapped.test": "::ffff:169.254.169.254",
		"v6meta.test": "fd00:ec2::254", "loop.test": "127.0.0.1", "loopmapped.test": "::ffff:127.0.0.1",
	}
	p, _ := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://*.test:*"), Timeout: 2 * time.Second}, hosts)
	for name, want := range map[string]string{
		"metadata.test": "is cloud metadata", "mapped.test": "is cloud metadata", "v6meta.test": "is cloud metadata",
		"loop.test": "is loopback", "loopmapped.test": "is loopback",
	} {
		reason, _ := script(t, p, "GET http://"+name+":"+port+"/")
		if !strings.Contains(reason, "code=-2") || !strings.Contains(reason, want) {
			t.Errorf("%s: reason %q, want code=-2 and %q", name, reason, want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server saw %d requests", n)
	}
	// 169.254.169.254 by literal: no name rule matches an IP.
	reason, _ := script(t, p, "GET http://169.254.169.254/latest/meta-data/")
	if !strings.Contains(reason, "code=-2") {
		t.Errorf("metadata IP literal: %q", reason)
	}
	// A name rule never lets a name reach loopback, even beside a rule naming the address.
	p2, _ := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://*.test:*", "http://127.0.0.1:"+port)}, hosts)
	if reason, _ := script(t, p2, "GET http://loop.test:"+port+"/"); !strings.Contains(reason, "code=-2") || !strings.Contains(reason, "is loopback") {
		t.Errorf("loop.test beside a rule naming 127.0.0.1: %q", reason)
	}
	if line, _ := script(t, p2, "GET http://127.0.0.1:"+port+"/"); !strings.HasPrefix(line, "status=200") {
		t.Errorf("127.0.0.1 by IP, allowed by IP: %q", line)
	}
}

// TestHTTPSpecialAddressOnlyByTheMatchingRule is the case: with "http://*:*" and
// "http://[127.0.0.1]:PORT/public", a name resolving to loopback is refused for every path
// (the rule that matched it, "*", names no address), directly or by a redirect, while the
// public path by IP is served. Each redirect hop is judged by the rule its own URL matches.
func TestHTTPSpecialAddressOnlyByTheMatchingRule(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+r.URL.Path)
		mu.Unlock()
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		fmt.Fprint(w, r.URL.Path)
	}))
	defer srv.Close()
	_, port := hostPort(t, srv)
	hosts := map[string]string{"localhost": "127.0.0.1", "public.test": "public:127.0.0.1"}
	p, _ := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://*:*", "http://[127.0.0.1]:"+port+"/public")}, hosts)
	ipPublic := "http://127.0.0.1:" + port + "/public"
	for _, tc := range []struct{ script, want string }{
		{"GET http://localhost:" + port + "/secret", "is loopback"},
		{"GET http://localhost:" + port + "/public", "is loopback"},
		{"GET " + ipPublic + "?to=" + url.QueryEscape("http://localhost:"+port+"/secret"), "is loopback"},
		{"GET http://127.0.0.1:" + port + "/secret", "no http.allow rule matches"},
		{"GET " + ipPublic, "status=200 code=0 read=7 retry-after= body=/public"},
		// A name the test's DNS calls public, redirected to the IP rule's path: each hop
		// under its own rule.
		{"GET http://public.test:" + port + "/x?to=" + url.QueryEscape(ipPublic), "status=200 code=0 read=7 retry-after= body=/public"},
	} {
		if got, _ := script(t, p, tc.script); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.script, got, tc.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.HasPrefix(s, "localhost") || strings.HasSuffix(s, "/secret") {
			t.Errorf("the server saw %q; seen %q", s, seen)
		}
	}
}

func TestHTTPWildcardHostRule(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.Host) }))
	defer srv.Close()
	_, port := hostPort(t, srv)
	hosts := map[string]string{"a.hooks.test": "public:127.0.0.1", "b.c.hooks.test": "public:127.0.0.1", "hooks.test": "public:127.0.0.1", "evilhooks.test": "public:127.0.0.1"}
	p, _ := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://*.hooks.test:"+port)}, hosts)
	for host, ok := range map[string]bool{"a.hooks.test": true, "b.c.hooks.test": true, "hooks.test": false, "evilhooks.test": false} {
		line, _ := script(t, p, "GET http://"+host+":"+port+"/")
		if got := strings.HasPrefix(line, "status=200"); got != ok {
			t.Errorf("%s: %q, want allowed=%v", host, line, ok)
		}
	}
}

func TestHTTPRedirects(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other") }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/in":
			http.Redirect(w, r, "/final", http.StatusFound)
		case "/out":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			fmt.Fprint(w, "final")
		}
	}))
	defer srv.Close()
	_, port := hostPort(t, srv)
	p, logs := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:"+port), MaxRedirects: 3}, nil)
	if line, _ := script(t, p, "GET "+srv.URL+"/in"); line != "status=200 code=0 read=5 retry-after= body=final" {
		t.Errorf("redirect inside the policy: %q", line)
	}
	reason, _ := script(t, p, "GET "+srv.URL+"/out")
	if !strings.Contains(reason, "code=-2") || !strings.Contains(reason, "matches no http.allow rule") {
		t.Errorf("redirect outside the policy: %q", reason)
	}
	if !strings.Contains(logs.String(), `rule="http.allow (redirect)"`) {
		t.Errorf("no log line names the redirect rule:\n%s", logs)
	}
	if reason, _ := script(t, p, "GET "+srv.URL+"/loop"); !strings.Contains(reason, "more than 3 redirects") {
		t.Errorf("redirect loop: %q", reason)
	}
}

// TestHTTPServerNeverAnswers: the message's time limit ends a request to a server that never
// answers; the pool then serves the next message.
func TestHTTPServerNeverAnswers(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			fmt.Fprint(w, "fine")
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	p, _ := httpPool(t, PoolConfig{Timeout: 300 * time.Millisecond, MinInstances: 1, MaxInstances: 1},
		&HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*"), Timeout: time.Hour}, nil)
	_, err := p.Call(context.Background(), &Input{ID: "m-1", Body: []byte("GET " + srv.URL + "/hang")})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("call to a silent server: %v, want ErrTimeout", err)
	}
	if line, _ := script(t, p, "GET "+srv.URL+"/ok"); !strings.HasPrefix(line, "status=200") {
		t.Errorf("next message after the timeout: %q", line)
	}
	// http.timeout shorter than the message's limit: the guest gets ERR_TIMEOUT and decides.
	p2, _ := httpPool(t, PoolConfig{Timeout: time.Hour}, &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*"), Timeout: 200 * time.Millisecond}, nil)
	if reason, _ := script(t, p2, "GET "+srv.URL+"/hang"); !strings.Contains(reason, "code=-10") || !strings.Contains(reason, "http.timeout") {
		t.Errorf("request past http.timeout: %q", reason)
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestHTTPHugeResponseTruncated: a 1 GiB response is cut at max_response_bytes; the guest
// reads exactly the cap, then ERR_TOO_LARGE, and the server is cut off far short of 1 GiB.
func TestHTTPHugeResponseTruncated(t *testing.T) {
	var sent atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		w.Header().Set("Content-Length", fmt.Sprint(1<<30))
		n, _ := io.Copy(w, io.LimitReader(zeros{}, 1<<30))
		sent.Store(n)
	}))
	defer srv.Close()
	const limit = 1 << 20
	p, _ := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*"), MaxResponseBytes: limit}, nil)
	line, out := script(t, p, "GET "+srv.URL+"/big - 65536")
	if want := fmt.Sprintf("status=200 code=-3 read=%d ", limit); !strings.HasPrefix(line, want) {
		t.Errorf("guest saw %q, want prefix %q", line, want)
	}
	if out.HTTP.BytesIn != limit {
		t.Errorf("report bytes in %d, want %d", out.HTTP.BytesIn, limit)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server kept sending 20s after the guest stopped reading")
	}
	if n := sent.Load(); n >= 1<<30 {
		t.Errorf("server sent the whole %d bytes; the host should have hung up at the cap", n)
	}
}

// TestHTTPCredentialNeverVisible: a credential goes only to its hosts (not to another
// allowed host, nor across a redirect), and the guest cannot read it through any host
// function, its environment, files, response headers or error texts.
func TestHTTPCredentialNeverVisible(t *testing.T) {
	const secret = "Bearer s3cr3t-token-value"
	var mu sync.Mutex
	seen := map[string]string{}
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name+r.URL.Path] = r.Header.Get("Authorization")
			mu.Unlock()
			if r.URL.Path == "/redirect" {
				http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
				return
			}
			fmt.Fprint(w, "ok")
		}
	}
	api := httptest.NewServer(record("api"))
	defer api.Close()
	other := httptest.NewServer(record("other"))
	defer other.Close()
	_, apiPort := hostPort(t, api)
	_, otherPort := hostPort(t, other)
	hosts := map[string]string{"api.test": "public:127.0.0.1", "other.test": "public:127.0.0.1"}
	pol := &HTTPPolicy{
		Allow:       rules(t, "http://*.test:*"),
		Credentials: map[string]Credential{"payments": {Header: "Authorization", Value: secret, Hosts: []string{"api.test"}}},
	}
	p, logs := httpPool(t, PoolConfig{Config: map[string]string{"payments": "not-the-secret"}}, pol, hosts)

	if line, _ := script(t, p, "GET http://api.test:"+apiPort+"/pay payments"); !strings.HasPrefix(line, "status=200") {
		t.Fatalf("request with the credential: %q", line)
	}
	reason, _ := script(t, p, "GET http://other.test:"+otherPort+"/pay payments")
	if !strings.Contains(reason, "code=-2") || !strings.Contains(reason, "not bound to host other.test") {
		t.Errorf("credential to a host it is not bound to: %q", reason)
	}
	to := url.QueryEscape("http://other.test:" + otherPort + "/landed")
	if line, _ := script(t, p, "GET http://api.test:"+apiPort+"/redirect?to="+to+" payments"); !strings.HasPrefix(line, "status=200") {
		t.Fatalf("redirect: %q", line)
	}
	steal, _ := script(t, p, "steal payments http://api.test:"+apiPort+"/echo")
	mu.Lock()
	defer mu.Unlock()
	if seen["api/pay"] != secret || seen["api/redirect"] != secret || seen["api/echo"] != secret {
		t.Errorf("the credential's host did not get the header: %q", seen)
	}
	if _, ok := seen["other/pay"]; ok {
		t.Errorf("the refused request reached the other host")
	}
	if v := seen["other/landed"]; v != "" {
		t.Errorf("the redirect carried the credential to another host: %q", v)
	}
	for where, text := range map[string]string{"guest": steal, "log": logs.String()} {
		if strings.Contains(text, "s3cr3t") {
			t.Errorf("the secret is visible to the %s:\n%s", where, text)
		}
	}
	if !strings.Contains(steal, "config:payments=not-the-secret") {
		t.Errorf("the steal fixture did not run its probes: %q", steal)
	}
}

func TestHTTPRequestsPerMessageAndTenantSlots(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	p, logs := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*"), MaxRequestsPerMessage: 1,
		Credentials: map[string]Credential{"x": {Header: "X-Key", Value: "k", Hosts: []string{"127.0.0.1"}}}}, nil)
	// The steal script makes two requests; the second is over the per-message cap.
	out, _ := script(t, p, "steal x "+srv.URL+"/")
	if !strings.Contains(out, "error2=http: GET http://127.0.0.1:1/: more than 1 requests") {
		t.Errorf("second request: %q", out)
	}
	if !strings.Contains(logs.String(), "rule=http.max_requests_per_message") {
		t.Errorf("log lacks the rule:\n%s", logs)
	}
	// Every slot is released when the message ends, even for responses the guest left open.
	if n := len(p.httpc.sem); n != 0 {
		t.Errorf("%d tenant slots held after the message", n)
	}
}

// connCountingServer is a loopback server that answers "ok" and counts the requests and the
// connections it accepted.
func connCountingServer(t testing.TB) (srv *httptest.Server, hits, conns *atomic.Int64) {
	hits, conns = new(atomic.Int64), new(atomic.Int64)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, hits, conns
}

// TestHTTPConnectionReusedAcrossMessages: a binding keeps its connections alive between
// messages, so a stream of requests to one receiver costs one TCP connection, not one each.
func TestHTTPConnectionReusedAcrossMessages(t *testing.T) {
	srv, hits, conns := connCountingServer(t)
	p, _ := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*/in")}, nil)
	for i := range 20 {
		if line, _ := script(t, p, fmt.Sprintf("POST %s/in/%d\n\nbody %d", srv.URL, i, i)); line != "status=200 code=0 read=2 retry-after= body=ok" {
			t.Fatalf("request %d: %q", i, line)
		}
	}
	if h, c := hits.Load(), conns.Load(); h != 20 || c != 1 {
		t.Errorf("the server saw %d requests on %d connections, want 20 on 1", h, c)
	}
}

// TestHTTPReusedConnectionStillPoliced: a live connection to an address does not let a
// request past the policy. While one binding holds an idle connection to 127.0.0.1 (which its
// rule names by IP), a path no rule allows is refused on it, and another binding of the same
// tenant, whose rule allows a name resolving to that address but not the address itself, is
// refused at dial: the pool is shared, but a connection is keyed by the URL's host and port
// and carries no policy, and a special address is only ever reached by a URL naming it by IP.
func TestHTTPReusedConnectionStillPoliced(t *testing.T) {
	srv, hits, conns := connCountingServer(t)
	_, port := hostPort(t, srv)
	p, _ := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:"+port+"/ok")}, nil)
	ok := func() {
		t.Helper()
		if line, _ := script(t, p, "GET http://127.0.0.1:"+port+"/ok"); !strings.HasPrefix(line, "status=200") {
			t.Fatalf("allowed request: %q", line)
		}
	}
	ok()
	if reason, _ := script(t, p, "GET http://127.0.0.1:"+port+"/other"); !strings.Contains(reason, "code=-2") || !strings.Contains(reason, "no http.allow rule matches") {
		t.Errorf("a path no rule allows, on a live connection: %q", reason)
	}
	other, err := p.t.NewPool(context.Background(), p.m, PoolConfig{Binding: "other", OutputQueue: "out",
		HTTP: &HTTPPolicy{Allow: rules(t, "http://*.test:"+port)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	other.httpc.resolve = func(h string) (string, bool) { return "127.0.0.1", h == "loop.test" }
	for _, tc := range []struct{ url, want string }{
		{"http://loop.test:" + port + "/ok", "is loopback"},
		{"http://127.0.0.1:" + port + "/ok", "no http.allow rule matches"},
	} {
		if reason, _ := script(t, other, "GET "+tc.url); !strings.Contains(reason, "code=-2") || !strings.Contains(reason, tc.want) {
			t.Errorf("other binding, %s, while hooks holds a connection there: %q, want code=-2 and %q", tc.url, reason, tc.want)
		}
	}
	ok()
	if h, c := hits.Load(), conns.Load(); h != 2 || c != 1 {
		t.Errorf("the server saw %d requests on %d connections, want the 2 allowed ones on 1", h, c)
	}
}

func TestParseHeaders(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    http.Header
		wantErr string
	}{
		{"", http.Header{}, ""},
		{"content-type: application/json\r\nX-A: 1\n\nX-B:  two words  ", http.Header{"Content-Type": {"application/json"}, "X-A": {"1"}, "X-B": {"two words"}}, ""},
		// Repeated names keep every value in order, and appending one never overwrites the
		// value of the name parsed after it (the values share one backing array).
		{"X-A: 1\nX-B: 2\nX-A: 3\nX-C: 4\nX-A: 5", http.Header{"X-A": {"1", "3", "5"}, "X-B": {"2"}, "X-C": {"4"}}, ""},
		{"X-A: 1\nHost: evil", nil, "header Host is set by the host"},
		{"no colon", nil, "malformed header line"},
		{"Bad Name: x", nil, "malformed header line"},
		{"X-A: a\x00b", nil, "malformed header line"},
	} {
		got, err := parseHeaders([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
