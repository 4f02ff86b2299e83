package runtime

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dualServer serves plain HTTP and TLS on one port (the first byte of a connection decides),
// so a redirect can downgrade from https to http without changing host or port. It returns
// the port and the pool of roots that trusts its certificate.
func dualServer(t *testing.T, h http.Handler) (port string, roots *x509.CertPool) {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.StartTLS() // only for its certificate and TLS config
	t.Cleanup(ts.Close)
	cfg := ts.TLS.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(&sniffListener{Listener: ln, tls: cfg}) }()
	t.Cleanup(func() { _ = srv.Close() })
	roots = x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, roots
}

type sniffListener struct {
	net.Listener
	tls *tls.Config
}

func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, perr := br.Peek(1)
	_ = c.SetReadDeadline(time.Time{})
	pc := &peekedConn{Conn: c, r: br}
	if perr == nil && b[0] == 0x16 { // a TLS handshake record
		return tls.Server(pc, l.tls), nil
	}
	return pc, nil
}

type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// recorder records, per "scheme path", the Authorization and Referer a request arrived with,
// and redirects to the "to" query parameter when there is one.
type recorder struct {
	mu   sync.Mutex
	auth map[string]string
	ref  map[string]string
}

func newRecorder() *recorder { return &recorder{auth: map[string]string{}, ref: map[string]string{}} }

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	rc.mu.Lock()
	rc.auth[scheme+" "+r.URL.Path] = r.Header.Get("Authorization")
	rc.ref[scheme+" "+r.URL.Path] = r.Header.Get("Referer")
	rc.mu.Unlock()
	if to := r.URL.Query().Get("to"); to != "" {
		http.Redirect(w, r, to, http.StatusFound)
		return
	}
	fmt.Fprint(w, "ok")
}

func (rc *recorder) get(m map[string]string, k string) (string, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	v, ok := m[k]
	return v, ok
}

// TestHTTPCredentialBoundToOrigin: a credential follows a redirect only to the scheme, host
// and port of the request it was added to: not after a downgrade from https to http on the
// same host and port, not to another port of the same host; the guest's own Authorization
// is dropped the same way. No redirect target gets a Referer (it would carry the original
// URL with its query).
func TestHTTPCredentialBoundToOrigin(t *testing.T) {
	const secret = "Bearer s3cr3t"
	rec := newRecorder()
	port, roots := dualServer(t, rec)
	other := httptest.NewServer(rec)
	defer other.Close()
	_, otherPort := hostPort(t, other)
	base := "127.0.0.1:" + port
	pol := &HTTPPolicy{
		Allow:       rules(t, "https://127.0.0.1:*", "http://127.0.0.1:*"),
		Credentials: map[string]Credential{"api": {Header: "Authorization", Value: secret, Hosts: []string{"127.0.0.1"}}},
	}
	p, _ := httpPool(t, PoolConfig{}, pol, nil)
	p.t.e.httpTr.TLSClientConfig.RootCAs = roots
	via := func(first, to string) string { return first + "?token=q1&to=" + url.QueryEscape(to) }
	for _, tc := range []struct {
		name, script string
		landed       string // where the redirect lands, "scheme path"
		wantAuth     string
	}{
		{"same origin keeps it", "GET " + via("https://"+base+"/a", "https://"+base+"/a-landed") + " api", "https /a-landed", secret},
		{"https to http, same host and port", "GET " + via("https://"+base+"/b", "http://"+base+"/b-landed") + " api", "http /b-landed", ""},
		{"another port of the host", "GET " + via("http://"+base+"/c", "http://127.0.0.1:"+otherPort+"/c-landed") + " api", "http /c-landed", ""},
		{"the guest's own header, downgraded", "GET " + via("https://"+base+"/d", "http://"+base+"/d-landed") + "\nAuthorization: Bearer guest-own", "http /d-landed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if line, _ := script(t, p, tc.script); !strings.HasPrefix(line, "status=200") {
				t.Fatalf("%q", line)
			}
			first := strings.Fields(tc.script)[1]
			u, _ := url.Parse(first)
			if a, _ := rec.get(rec.auth, u.Scheme+" "+u.Path); a == "" {
				t.Errorf("the first request (%s) lacked its Authorization", first)
			}
			got, ok := rec.get(rec.auth, tc.landed)
			if !ok {
				t.Fatalf("the redirect never reached %s", tc.landed)
			}
			if got != tc.wantAuth {
				t.Errorf("%s got Authorization %q, want %q", tc.landed, got, tc.wantAuth)
			}
			if ref, _ := rec.get(rec.ref, tc.landed); ref != "" {
				t.Errorf("%s got Referer %q", tc.landed, ref)
			}
		})
	}
}

// TestHTTPOnePoolForTheHost: the bindings of every tenant share one connection pool: two
// bindings of two tenants calling one server use one connection between them, and the idle
// connections of the whole host are capped (lowered to 2 here to keep the test small): after
// requests to 4 servers from 2 bindings, 2 connections stay open.
func TestHTTPOnePoolForTheHost(t *testing.T) {
	p, _ := httpPool(t, PoolConfig{}, &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*")}, nil)
	e := p.t.e
	if e.httpTr.MaxIdleConns != maxIdle || e.httpTr.MaxIdleConnsPerHost != maxIdlePerHost {
		t.Fatalf("transport caps %d/%d, want %d/%d", e.httpTr.MaxIdleConns, e.httpTr.MaxIdleConnsPerHost, maxIdle, maxIdlePerHost)
	}
	ten2, err := e.Tenant("globex", TenantLimits{MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := ten2.NewPool(context.Background(), p.m, PoolConfig{Binding: "other", OutputQueue: "out", HTTP: &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p2.Close(context.Background()) })
	srv, hits, conns := connCountingServer(t)
	for i := range 6 {
		if line, _ := script(t, []*Pool{p, p2}[i%2], "GET "+srv.URL+"/"); !strings.HasPrefix(line, "status=200") {
			t.Fatalf("request %d: %q", i, line)
		}
	}
	if h, c := hits.Load(), conns.Load(); h != 6 || c != 1 {
		t.Errorf("two tenants' bindings: %d requests on %d connections, want 6 on 1", h, c)
	}

	e.httpTr.CloseIdleConnections()
	e.httpTr.MaxIdleConns = 2
	var open atomic.Int64
	closed := make(chan struct{}, 8)
	for i := range 4 {
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
		s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
				closed <- struct{}{}
			}
		}
		s.Start()
		t.Cleanup(s.Close)
		if line, _ := script(t, []*Pool{p, p2}[i%2], "GET "+s.URL+"/"); !strings.HasPrefix(line, "status=200") {
			t.Fatalf("server %d: %q", i, line)
		}
	}
	for range 2 {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d connections still open 10s after 4 requests under a cap of 2", open.Load())
		}
	}
	if n := open.Load(); n != 2 {
		t.Errorf("%d connections open, want 2 (the host-wide idle cap)", n)
	}
}
