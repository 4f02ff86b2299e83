package console

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/admin"
)

var testTokens = admin.Tokens{Host: "host-tok", Tenants: map[string]string{"acme": "acme-tok", "beta": "beta-tok"}}

// The fake API's status: acme's memory budget is 512 MiB with 128 MiB reserved; beta's is
// unlimited; the host's 8 GiB, a share of a cgroup's 10 GiB.
const fakeHostMemory = `{"limit_bytes":8589934592,"reserved_bytes":1610612736,"peak_bytes":2147483648,` +
	`"by_consumer":{"instances":1073741824,"kernel":0,"modules":268435456,"compile":268435456,"messages":0},"refused":7,` +
	`"limit_source":"cgroup v2 memory.max","process_limit_bytes":10737418240,"resident_bytes":314572800}`

var fakeTenantStatus = map[string]string{
	"acme": `{"name":"acme","memory":{"limit_bytes":536870912,"reserved_bytes":134217728,"peak_bytes":209715200,` +
		`"by_consumer":{"instances":100663296,"kernel":16777216,"modules":12582912,"compile":0,"messages":4194304},"refused":3},` +
		`"bindings":[{"name":"<b>x</b>","queue":"jobs","messages":{"visible":3}}]}`,
	"beta": `{"name":"beta","memory":{"limit_bytes":0,"reserved_bytes":10485760,"peak_bytes":10485760,` +
		`"by_consumer":{"instances":10485760,"kernel":0,"modules":0,"compile":0,"messages":0},"refused":0},` +
		`"bindings":[{"name":"secret","queue":"in","messages":{"visible":1}}]}`,
}

// fakeAPI answers as the admin API would for the few routes the console reads, with a
// dead letter whose body and reason are markup, and refuses a tenant token on another
// tenant's path (403) as the API does.
func fakeAPI(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	who := func(r *http.Request) (string, bool) {
		tenant, host, ok := admin.Identify(testTokens, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if !ok {
			return "", false
		}
		if host {
			return "", true
		}
		return tenant, true
	}
	guard := func(w http.ResponseWriter, r *http.Request) bool {
		tenant, ok := who(r)
		if !ok {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return false
		}
		if tenant != "" && r.PathValue("tenant") != "" && r.PathValue("tenant") != tenant {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":"this token may not see tenant"}`)
			return false
		}
		return true
	}
	// Status is filtered to a tenant token's tenant, as the API's is; the host's memory is
	// in every answer, as in the API's.
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		if !guard(w, r) {
			return
		}
		tenant, _ := who(r)
		var ts []string
		for _, name := range []string{"acme", "beta"} {
			if tenant == "" || tenant == name {
				ts = append(ts, fakeTenantStatus[name])
			}
		}
		_, _ = io.WriteString(w, `{"page":{"total":`+strconv.Itoa(len(ts))+`},"memory":`+fakeHostMemory+`,"tenants":[`+strings.Join(ts, ",")+`]}`)
	})
	// Reasons, the body and an attribute also hold a bidi override (U+202E), written as
	// JSON's escape: a page must show it as the text \u202e, not reorder what follows.
	dl := `{"id":"7","reason":"<img src=x onerror=alert(1)> \u202Egnp.exe","dequeue_count":2,"size":29,"body":"<script>alert(1)</script>\u202Etxt.exe","attributes":{"wqhost.fuel":"1234","trace":"t\u2066x","wqhost.attempts":"[{\"at\":\"2026-11-25T10:00:00Z\",\"wall_us\":17,\"fuel\":555,\"outcome\":\"failed\",\"reason\":\"<b>x</b> trap\\u202Eab\"}]"}}`
	mux.HandleFunc("GET /v1/tenants/{tenant}/queues/{queue}/deadletters", func(w http.ResponseWriter, r *http.Request) {
		if guard(w, r) {
			_, _ = io.WriteString(w, `{"items":[`+dl+`],"next":"c1"}`)
		}
	})
	mux.HandleFunc("GET /v1/tenants/{tenant}/queues/{queue}/deadletters/{id}", func(w http.ResponseWriter, r *http.Request) {
		if guard(w, r) {
			_, _ = io.WriteString(w, dl)
		}
	})
	mux.HandleFunc("POST /v1/tenants/{tenant}/queues/{queue}/deadletters/count", func(w http.ResponseWriter, r *http.Request) {
		if guard(w, r) {
			_, _ = io.WriteString(w, `{"count":1}`)
		}
	})
	return mux
}

// client is a browser-like client of a console server: a cookie jar, no redirects followed.
type client struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newClient(t *testing.T, base string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, c: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *client) do(method, path, body string, hdr map[string]string) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if method == http.MethodPost && hdr["Content-Type"] == "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (c *client) login(token string) *http.Response {
	c.t.Helper()
	resp, _ := c.do("POST", "/console/login", url.Values{"token": {token}}.Encode(), nil)
	return resp
}

func newServer(t *testing.T) (*Console, *httptest.Server) {
	con := New(Options{API: fakeAPI(t), Tokens: func() admin.Tokens { return testTokens },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Interval: 20 * time.Millisecond})
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	t.Cleanup(con.Close)
	return con, srv
}

// csrfOf reads the CSRF token a page carries.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `name="csrf-token" content="`)
	if !ok {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	tok, _, _ := strings.Cut(rest, `"`)
	return tok
}

// TestLoginPageOnAHostWithoutToken: a host with no token configured says on the login
// page that an empty token logs in (and it does); a host with tokens does not.
func TestLoginPageOnAHostWithoutToken(t *testing.T) {
	con := New(Options{API: fakeAPI(t), Tokens: func() admin.Tokens { return admin.Tokens{} },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Interval: 20 * time.Millisecond})
	open := httptest.NewServer(con)
	t.Cleanup(open.Close)
	t.Cleanup(con.Close)
	_, closed := newServer(t)
	for _, tc := range []struct {
		url  string
		hint bool
	}{{open.URL, true}, {closed.URL, false}} {
		c := newClient(t, tc.url)
		_, page := c.do("GET", "/console/login", "", nil)
		if got := strings.Contains(page, "log in with the field empty"); got != tc.hint {
			t.Errorf("%s: login page hints at an empty token: %v, want %v", tc.url, got, tc.hint)
		}
		if tc.hint {
			if resp := c.login(""); resp.StatusCode != http.StatusSeeOther {
				t.Errorf("empty token on a host without one: %d, want 303", resp.StatusCode)
			}
		}
	}
}

// Login: a wrong token gets 401 and no cookie; a good one a session cookie (HttpOnly,
// SameSite=Strict, not Secure over plain HTTP) that is an opaque id, and a redirect whose URL
// holds no token. Pages without a session send to the login page.
func TestLoginSession(t *testing.T) {
	_, srv := newServer(t)
	c := newClient(t, srv.URL)
	if resp, _ := c.do("GET", "/console/", "", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Fatalf("overview without a session: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := c.login("nope"); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("bad token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp := c.login("acme-tok")
	if resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "tok") {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Secure || ck[0].Path != "/console" ||
		strings.Contains(ck[0].Value, "acme-tok") || len(ck[0].Value) < 40 {
		t.Fatalf("session cookie %+v", ck)
	}
	if resp, body := c.do("GET", "/console/", "", nil); resp.StatusCode != 200 || !strings.Contains(body, "signed in as tenant acme") {
		t.Fatalf("overview: %d\n%s", resp.StatusCode, body)
	}
	// A cross-origin login is refused.
	if resp, _ := c.do("POST", "/console/login", "token=acme-tok", map[string]string{"Origin": "https://evil.example"}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin login: %d, want 403", resp.StatusCode)
	}
}

// State changes need the session's CSRF token (form field or header) and a same-origin
// Origin; logout ends the session and its cookie no longer opens pages.
func TestCSRFAndLogout(t *testing.T) {
	_, srv := newServer(t)
	c := newClient(t, srv.URL)
	c.login("acme-tok")
	_, page := c.do("GET", "/console/", "", nil)
	tok := csrfOf(t, page)
	count := "/console/api/tenants/acme/queues/jobs/deadletters/count"
	json := map[string]string{"Content-Type": "application/json"}
	for _, h := range []map[string]string{json, {"Content-Type": "application/json", "X-CSRF-Token": "wrong"},
		{"Content-Type": "application/json", "X-CSRF-Token": tok, "Origin": "https://evil.example"}} {
		if resp, _ := c.do("POST", count, `{"filter":{}}`, h); resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST with headers %v: %d, want 403", h, resp.StatusCode)
		}
	}
	if resp, body := c.do("POST", count, `{"filter":{}}`, map[string]string{"Content-Type": "application/json", "X-CSRF-Token": tok, "Origin": srv.URL}); resp.StatusCode != 200 || !strings.Contains(body, `"count":1`) {
		t.Errorf("POST with the token: %d %s", resp.StatusCode, body)
	}
	if resp, _ := c.do("POST", "/console/logout", "", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout without the token: %d, want 403", resp.StatusCode)
	}
	if resp, _ := c.do("POST", "/console/logout", url.Values{"csrf": {tok}}.Encode(), nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := c.do("GET", "/console/api/status", "", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("API after logout: %d, want 401", resp.StatusCode)
	}
}

// Bodies, reasons and names are rendered as text: no markup of theirs reaches the page.
func TestEscaping(t *testing.T) {
	_, srv := newServer(t)
	c := newClient(t, srv.URL)
	c.login("acme-tok")
	for _, p := range []string{"/console/", "/console/tenants/acme/queues/jobs/deadletters", "/console/tenants/acme/queues/jobs/deadletters/7"} {
		resp, body := c.do("GET", p, "", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d\n%s", p, resp.StatusCode, body)
		}
		for _, raw := range []string{"<script>alert", "<img src=x", "<b>x</b>"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s shows %q unescaped", p, raw)
			}
		}
		if p != "/console/" && !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the body as text:\n%s", p, body)
		}
	}
	_, body := c.do("GET", "/console/tenants/acme/queues/jobs/deadletters/7", "", nil)
	if !strings.Contains(body, "wqhost.fuel") || !strings.Contains(body, "1234") {
		t.Errorf("the detail does not show the metering attribute:\n%s", body)
	}
	if !strings.Contains(body, "2026-11-25 10:00:00.000") || !strings.Contains(body, "&lt;b&gt;x&lt;/b&gt; trap") || !strings.Contains(body, "555") {
		t.Errorf("the detail does not show the recorded attempt (time, escaped reason, fuel):\n%s", body)
	}
}

// Bidi controls in what a guest or a message wrote (reasons, bodies, attributes) are shown
// as escapes, as the CLI shows them, never sent raw: U+202E would show "gnp.exe" as
// "exe.png".
func TestBidiControlsShownEscaped(t *testing.T) {
	_, srv := newServer(t)
	c := newClient(t, srv.URL)
	c.login("acme-tok")
	for _, tc := range []struct {
		page string
		want []string
	}{
		{"/console/tenants/acme/queues/jobs/deadletters", []string{`\u202egnp.exe`, `\u202etxt.exe`}},
		{"/console/tenants/acme/queues/jobs/deadletters/7", []string{`\u202egnp.exe`, `\u202etxt.exe`, `trap\u202eab`, `t\u2066x`}},
	} {
		resp, body := c.do("GET", tc.page, "", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d\n%s", tc.page, resp.StatusCode, body)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s does not show %q", tc.page, w)
			}
		}
		if i := strings.IndexAny(body, "\u202e\u2066"); i >= 0 {
			t.Errorf("%s holds a raw bidi control: %q", tc.page, body[max(0, i-40):min(len(body), i+40)])
		}
	}
}

func TestVisible(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text\nsecond line\ttab", "plain text\nsecond line\ttab"},
		{"a\u202eb", `a\u202eb`},
		{"\u2066\u2067\u2068\u2069\u202a\u202b\u202c\u202d\u200e\u200f\u061c", `\u2066\u2067\u2068\u2069\u202a\u202b\u202c\u202d\u200e\u200f\u061c`},
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		{"esc\x1b[31m del\x7f cr\r c1\u0085", `esc\x1b[31m del\x7f cr\x0d c1\u0085`},
		{"bad \xff byte", `bad \xff byte`},
		{"é ü 日本 \\u202e", "é ü 日本 \\u202e"},
	} {
		if got := visible(tc.in); got != tc.want {
			t.Errorf("visible(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A tenant session gets the API's 403 on another tenant's pages and API paths.
func TestCrossTenant(t *testing.T) {
	_, srv := newServer(t)
	c := newClient(t, srv.URL)
	c.login("acme-tok")
	for _, p := range []string{"/console/tenants/beta/queues/jobs/deadletters", "/console/tenants/beta/queues/jobs/deadletters/7",
		"/console/api/tenants/beta/queues/jobs/deadletters"} {
		if resp, body := c.do("GET", p, "", nil); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "alert") {
			t.Errorf("%s as acme: %d\n%s", p, resp.StatusCode, body)
		}
	}
}

// The live stream sends snapshots, ends when the session logs out, and is bounded per
// session (429 beyond).
func TestEventsStream(t *testing.T) {
	con, srv := newServer(t)
	c := newClient(t, srv.URL)
	c.login("acme-tok")
	_, page := c.do("GET", "/console/", "", nil)
	tok := csrfOf(t, page)
	var open []*http.Response
	for range MaxStreamsPerSession {
		req, _ := http.NewRequest("GET", srv.URL+"/console/events", nil)
		resp, err := c.c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v %v", resp, err)
		}
		open = append(open, resp)
	}
	if resp, _ := c.do("GET", "/console/events", "", nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("stream beyond the per-session bound: %d, want 429", resp.StatusCode)
	}
	buf := make([]byte, 4096)
	n, _ := io.ReadAtLeast(open[0].Body, buf, 20)
	ev := string(buf[:n])
	if !strings.HasPrefix(ev, "event: snapshot\ndata: ") {
		t.Fatalf("first event %q", ev)
	}
	var snap Snapshot
	data, _, _ := strings.Cut(strings.TrimPrefix(ev, "event: snapshot\ndata: "), "\n")
	if err := json.Unmarshal([]byte(data), &snap); err != nil || len(snap.Rows) != 1 || snap.Rows[0].Visible != 3 {
		t.Fatalf("snapshot %s: %+v %v", data, snap, err)
	}
	c.do("POST", "/console/logout", url.Values{"csrf": {tok}}.Encode(), nil)
	for _, resp := range open {
		done := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, resp.Body); done <- err }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a stream stayed open after its session logged out")
		}
		resp.Body.Close()
	}
	con.mu.Lock()
	n = con.streams
	con.mu.Unlock()
	if n != 0 {
		t.Errorf("%d streams counted after all ended", n)
	}
}
