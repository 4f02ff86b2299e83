package main

import (
	"bytes"
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
