package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host"
)

// TestStatusTableShowsReloadErrors: a failed module reload shows in the binding's row and a
// failed config reload above the table, escaped for the terminal; none shows "-".
func TestStatusTableShowsReloadErrors(t *testing.T) {
	at := time.Now().Add(-time.Minute)
	st := host.Status{Ready: true, LastConfigReloadError: "config reload (the running config stays): tenants.x: bad\x1b[2J", LastConfigReloadErrorAt: &at,
		Tenants: []host.TenantStatus{{Name: "default", Bindings: []host.BindingStatus{
			{Name: "a", Queue: "jobs", LastReloadError: "module handler.wasm: not a valid wasm module", LastReloadErrorAt: &at},
			{Name: "b", Queue: "other"},
		}}}}
	var out bytes.Buffer
	if err := printStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"config reload failed (1m0s ago), the running config stays:", `tenants.x: bad\x1b[2J`, "RELOAD ERROR", "module handler.wasm: not a valid wasm module (1m0s ago)"} {
		if !strings.Contains(s, want) {
			t.Errorf("status lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "\x1b") {
		t.Errorf("status printed a raw escape:\n%q", s)
	}
	if strings.Count(s, "the running config stays") != 1 {
		t.Errorf("status says the running config stays more than once:\n%s", s)
	}
	if lines := strings.Split(strings.TrimSpace(s), "\n"); !strings.HasSuffix(strings.TrimSpace(lines[len(lines)-1]), "-") {
		t.Errorf("binding without reload error should end with -: %q", lines[len(lines)-1])
	}
}

// TestStatusTableShowsBreaker: a binding's circuit breaker shows with its trips, so an
// operator sees which binding the host is holding back.
func TestStatusTableShowsBreaker(t *testing.T) {
	st := host.Status{Ready: true, Tenants: []host.TenantStatus{{Name: "default", Bindings: []host.BindingStatus{
		{Name: "spin", Queue: "jobs", Breaker: host.BreakerStatus{State: "open", Trips: 3}},
		{Name: "ok", Queue: "other", Breaker: host.BreakerStatus{State: "closed"}},
	}}}}
	var out bytes.Buffer
	if err := printStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"BREAKER", "open (3 trips)", "closed"} {
		if !strings.Contains(s, want) {
			t.Errorf("status lacks %q:\n%s", want, s)
		}
	}
}

// TestStatusFlagsPassThrough: --tenant, --limit and --offset reach GET /v1/status as its
// query, and the table says which page of how many bindings it shows.
func TestStatusFlagsPassThrough(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		query string
	}{
		{nil, ""},
		{[]string{"--tenant", "acme"}, "tenant=acme"},
		{[]string{"--limit", "2"}, "limit=2"},
		{[]string{"--tenant", "acme", "--limit", "2", "--offset", "4"}, "limit=2&offset=4&tenant=acme"},
	} {
		var got string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got = r.URL.RawQuery
			st := host.Status{Ready: true, BindingsUp: 10, BindingsTotal: 10,
				Page:    host.Page{Tenant: "acme", Offset: 4, Limit: 2, Returned: 2, Total: 9},
				Tenants: []host.TenantStatus{{Name: "acme", Bindings: []host.BindingStatus{{Name: "b4", Queue: "q4"}, {Name: "b5", Queue: "q5"}}}}}
			_ = json.NewEncoder(w).Encode(st)
		}))
		var out, errb bytes.Buffer
		c := &cli{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		err := c.status(context.Background(), append([]string{"--admin", srv.URL}, tc.args...))
		srv.Close()
		if err != nil {
			t.Fatalf("status %v: %v\n%s", tc.args, err, errb.String())
		}
		if got != tc.query {
			t.Errorf("status %v: query %q, want %q", tc.args, got, tc.query)
		}
		for _, want := range []string{"host ready, 10 bindings", "showing 2 of 9 bindings of tenant acme from offset 4 (next page: --offset 6)"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("status %v lacks %q:\n%s", tc.args, want, out.String())
			}
		}
	}
	var out bytes.Buffer
	c := &cli{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	if err := c.status(context.Background(), []string{"--limit", "-1"}); err == nil || !strings.Contains(err.Error(), "must not be negative") {
		t.Errorf("--limit -1: %v", err)
	}
}

// TestStatusErrorIsTheAPIMessage: an error answer shows the API's message, not its JSON,
// with control characters escaped.
func TestStatusErrorIsTheAPIMessage(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"error": "tenant \"nope\" is not configured"}`, `404 Not Found: tenant "nope" is not configured`},
		{"not json \x1b[31m", `404 Not Found: not json \x1b[31m`},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(tc.body))
		}))
		var out bytes.Buffer
		c := &cli{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		err := c.status(context.Background(), []string{"--admin", srv.URL, "--tenant", "nope"})
		srv.Close()
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("answer %q: err = %v, want it to end %q", tc.body, err, tc.want)
		}
	}
}

// TestStatusTableShowsStartProgress: a host still starting says how many bindings are up.
func TestStatusTableShowsStartProgress(t *testing.T) {
	var out bytes.Buffer
	if err := printStatus(&out, host.Status{BindingsUp: 1200, BindingsTotal: 10000}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "host starting, 1200 of 10000 bindings up") {
		t.Errorf("status of a starting host:\n%s", s)
	}
}
