package console

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// cut is the part of s from the first start to the end after it ("" without start).
func cut(s, start, end string) string {
	_, rest, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	in, _, _ := strings.Cut(rest, end)
	return in
}

// The overview's Memory panel: the host's session sees the host's budget (limit, reserved
// by consumer, resident memory, where the budget came from) and a row per tenant with its
// budget, reserved against it, by consumer, refusals and peak. A tenant's session sees its
// own row only: not the host's budget (which the API answer carries) nor another tenant.
func TestMemoryPanel(t *testing.T) {
	_, srv := newServer(t)

	host := newClient(t, srv.URL)
	host.login("host-tok")
	resp, page := host.do("GET", "/console/", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("host overview: %d\n%s", resp.StatusCode, page)
	}
	hm := cut(page, `<table id="host-memory">`, "</table>")
	for _, want := range []string{`"n limit">8 GiB<`, `"bytes">1.5 GiB<`, `value="0.1875"`, "18.8%", `"n instances">1 GiB<`,
		`"n kernel">0 B<`, `"n modules">256 MiB<`, `"n compile">256 MiB<`, `"n refused">7<`, `"n peak">2 GiB<`,
		`"n resident">300 MiB<`, "share of the process&#39;s limit, 10 GiB (cgroup v2 memory.max)"} {
		if !strings.Contains(hm, want) {
			t.Errorf("the host's memory panel lacks %q:\n%s", want, hm)
		}
	}
	acme := cut(page, `<tr data-tenant="acme">`, "</tr>")
	for _, want := range []string{`"n limit">512 MiB<`, `"bytes">128 MiB<`, `value="0.25"`, "25.0%", `"n instances">96 MiB<`,
		`"n kernel">16 MiB<`, `"n modules">12 MiB<`, `"n messages">4 MiB<`, `"n refused">3<`, `"n peak">200 MiB<`} {
		if !strings.Contains(acme, want) {
			t.Errorf("acme's memory row lacks %q:\n%s", want, acme)
		}
	}
	if strings.Contains(acme, "compile") {
		t.Errorf("a tenant's row lists compile children, which reserve from the host's budget only:\n%s", acme)
	}
	beta := cut(page, `<tr data-tenant="beta">`, "</tr>")
	if !strings.Contains(beta, `"n limit">unlimited<`) || !strings.Contains(beta, `"bytes">10 MiB<`) || strings.Contains(beta, "<meter") {
		t.Errorf("beta's row (unlimited budget, 10 MiB reserved, no meter):\n%s", beta)
	}

	for _, tc := range []struct{ token, own, other string }{{"acme-tok", "acme", "beta"}, {"beta-tok", "beta", "acme"}} {
		c := newClient(t, srv.URL)
		c.login(tc.token)
		resp, page := c.do("GET", "/console/", "", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s overview: %d\n%s", tc.own, resp.StatusCode, page)
		}
		row := cut(page, `<tr data-tenant="`+tc.own+`">`, "</tr>")
		if row == "" || tc.own == "acme" && (!strings.Contains(row, `"n limit">512 MiB<`) || !strings.Contains(row, "25.0%")) {
			t.Errorf("%s's overview lacks its own memory row (budget, reserved):\n%s", tc.own, page)
		}
		for _, leak := range []string{"host-memory", "Host budget", "8 GiB", "Resident", "cgroup", tc.other} {
			if strings.Contains(page, leak) {
				t.Errorf("%s's overview shows %q", tc.own, leak)
			}
		}
	}
}

// The live stream carries the panel: the host's budget to the host's session only.
func TestMemoryInStream(t *testing.T) {
	_, srv := newServer(t)
	for _, tc := range []struct {
		token   string
		host    bool
		tenants []string
	}{{"host-tok", true, []string{"acme", "beta"}}, {"acme-tok", false, []string{"acme"}}} {
		c := newClient(t, srv.URL)
		c.login(tc.token)
		req, _ := http.NewRequest("GET", srv.URL+"/console/events", nil)
		resp, err := c.c.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream: %v %v", resp, err)
		}
		buf := make([]byte, 16<<10)
		n, _ := io.ReadAtLeast(resp.Body, buf, 20)
		resp.Body.Close()
		ev := string(buf[:n])
		data, _, _ := strings.Cut(strings.TrimPrefix(ev, "event: snapshot\ndata: "), "\n")
		var snap Snapshot
		if err := json.Unmarshal([]byte(data), &snap); err != nil {
			t.Fatalf("%s: snapshot %q: %v", tc.token, ev, err)
		}
		if (snap.Memory.Host != nil) != tc.host {
			t.Errorf("%s: the stream carries the host's budget: %v, want %v", tc.token, snap.Memory.Host != nil, tc.host)
		}
		if !tc.host && (strings.Contains(data, "resident") || strings.Contains(data, "8 GiB")) {
			t.Errorf("%s: the stream carries host memory: %s", tc.token, data)
		}
		var names []string
		for _, b := range snap.Memory.Tenants {
			names = append(names, b.Name)
		}
		if strings.Join(names, ",") != strings.Join(tc.tenants, ",") {
			t.Errorf("%s: the stream's memory rows %v, want %v", tc.token, names, tc.tenants)
		}
		if snap.Memory.Tenants[0].Limit != "512 MiB" || snap.Memory.Tenants[0].Reserved != "128 MiB" || snap.Memory.Tenants[0].Percent != "25.0%" {
			t.Errorf("%s: acme's budget in the stream %+v", tc.token, snap.Memory.Tenants[0])
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1 KiB"}, {1536, "1.5 KiB"}, {512 << 20, "512 MiB"},
		{3 << 29, "1.5 GiB"}, {8 << 30, "8 GiB"}, {5 << 40, "5 TiB"}, {5 << 50, "5120 TiB"}, {123456789, "117.7 MiB"},
	} {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
