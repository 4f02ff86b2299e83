package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// tally counts what the test really did, for its Must-show line.
type tally struct {
	pages   map[string]bool // console pages rendered and checked
	actions int             // user actions done through the console and checked
	denied  int             // cross-tenant attempts refused, each checked
	// escapes counts the checks that a markup body rendered as text; escapeFailed is set
	// by any that did not.
	escapes      int
	escapeFailed bool
}

// escape records one escaping check.
func (c *tally) escape(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	c.escapes++
	if !ok {
		c.escapeFailed = true
		t.Errorf(format, args...)
	}
}

func (c *tally) page(name string) { c.pages[name] = true }

// deny checks that an attempt on another tenant's data got 403.
func (c *tally) deny(t *testing.T, what string, code int) {
	t.Helper()
	if code != http.StatusForbidden {
		t.Errorf("cross-tenant %s: status %d, want 403", what, code)
		return
	}
	c.denied++
}

// denyIf counts a cross-tenant attempt whose refusal was checked otherwise.
func (c *tally) denyIf(t *testing.T, what string, refused bool) {
	t.Helper()
	if !refused {
		t.Errorf("cross-tenant %s: not refused", what)
		return
	}
	c.denied++
}

// scriptBody is a dead letter's body of markup and a bidi override (U+202E, which would
// show "gnp.exe" as "exe.png"); scriptShown is how the console must show it: as text, the
// override as an escape.
const (
	scriptBody  = "fail:<script>alert(1)</script>\u202egnp.exe"
	scriptShown = `fail:<script>alert(1)</script>\u202egnp.exe`
)

// TestConsoleE2E logs in to the console of a real host in headless Chromium as tenant acme
// and: sees a binding's depth change live (SSE) while messages are sent, and its memory
// budget (512 MiB) in the live Memory panel, without the host's budget or beta's; rolls a hot-swapped
// binding back to its previous version; filters dead letters, dry-runs and redrives a
// filtered set with its progress, and purges one after a confirmation showing its count;
// opens a message's detail. A body of <script> renders as text everywhere and no dialog
// opens. Every attempt on tenant beta's data, through console pages, the console's API proxy,
// its live stream and the admin API itself, is refused. It logs out (the session ends), and
// the host token then sees both tenants. Screenshots go to the printed directory.
func TestConsoleE2E(t *testing.T) {
	chromium(t) // skip or fail before starting a host
	e := startHost(t)
	b := newBrowser(t, e.base)
	c := &tally{pages: map[string]bool{}}

	// Login: a wrong token is refused, acme's opens a session whose cookie is out of the
	// scripts' reach and whose URL never holds the token.
	b.open("/console/", "#login")
	c.page("login")
	b.shot("login")
	b.do("wrong token", chromedp.SetValue(chromedp.CSS("#token"), "nope"), chromedp.Click(chromedp.CSS("#login-button")),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	b.do("login as acme", chromedp.SetValue(chromedp.CSS("#token"), acmeToken), chromedp.Click(chromedp.CSS("#login-button")),
		chromedp.WaitVisible(chromedp.CSS("#bindings")))
	c.actions++
	checkSessionCookie(t, b)

	// Overview: acme's bindings only, kept live by the stream.
	b.waitFor("overview rows", `document.querySelector('tr[data-key="acme/slow"]') && document.getElementById("live-state").textContent === "live"`)
	var keys []string
	b.eval("overview keys", `[...document.querySelectorAll("#bindings tbody tr")].map(r => r.dataset.key)`, &keys)
	for _, k := range keys {
		if strings.HasPrefix(k, "beta/") {
			t.Errorf("acme's overview lists %s", k)
		}
	}
	if len(keys) != 3 {
		t.Errorf("acme's overview rows %v, want its 3 bindings", keys)
	}
	c.denyIf(t, "overview rows", !strings.Contains(strings.Join(keys, ","), "beta/"))
	memoryPanel(t, b, c)
	c.page("overview")
	b.shot("overview")
	b.eval("mark the page", `window.__e2e = "same page"`, nil)
	e.send(t, "acme", "slow", strings.Split(strings.Repeat("sleep:400,", 8), ",")[:8]...)
	depth := `(() => { const r = document.querySelector('tr[data-key="acme/slow"]'); return r && ` +
		`(+r.querySelector(".visible").textContent) + (+r.querySelector(".leased").textContent) + (+r.querySelector(".delayed").textContent); })()`
	b.waitFor("slow's depth rises live", depth+` > 0`)
	b.shot("overview-depth-live")
	b.waitFor("slow's depth drains live", depth+` === 0 && window.__e2e === "same page"`)

	// Binding page: v2 swapped in by a reload, then rolled back to v1 in one click.
	v1, v2 := digest(t, fixtureV1)[:12], digest(t, fixtureV2)[:12]
	copyFile(t, fixtureV2, filepath.Join(e.dir, "handler.wasm"))
	if code, body := e.api(t, "POST", "/v1/reload", hostToken, ""); code != 200 {
		t.Fatalf("reload: %d %s", code, body)
	}
	b.open("/console/tenants/acme/bindings/echo", "#history")
	c.page("binding")
	b.waitFor("v2 serving", fmt.Sprintf(`document.getElementById("serving").textContent === %q && document.getElementById("rollback").textContent.includes(%q)`, v2, v1))
	b.shot("binding-hot-swapped")
	// The rollback asks first: opening the question changes nothing.
	b.do("rollback question", chromedp.Click(chromedp.CSS("#rollback")), chromedp.WaitVisible(chromedp.CSS("#rollback-yes")))
	if d, err := e.h.BindingDetail(context.Background(), "acme", "echo"); err != nil || d.Status.ModuleDigest[:12] != v2 {
		t.Fatalf("the rollback question alone changed the version served: %v (%v)", d.Status.ModuleDigest, err)
	}
	b.shot("rollback-confirm")
	b.do("rollback", chromedp.Click(chromedp.CSS("#rollback-yes")), chromedp.WaitVisible(chromedp.CSS("#notice")))
	b.waitFor("v1 serving", fmt.Sprintf(`document.getElementById("serving").textContent === %q && document.querySelectorAll("#history tbody tr").length === 3`, v1))
	if d, err := e.h.BindingDetail(context.Background(), "acme", "echo"); err != nil || d.Status.ModuleDigest[:12] != v1 {
		t.Fatalf("after the console's rollback the host serves %v (%v), want %s", d.Status.ModuleDigest, err, v1)
	}
	// The version rolled back to handles the messages from now on.
	e.send(t, "acme", "in", "after-rollback")
	out, err := e.h.OpenQueue(context.Background(), "acme", "out")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	eventually(t, "echo's output after the rollback", time.Minute, func() bool {
		ms, err := out.Receive(context.Background(), 10, time.Minute)
		for _, m := range ms {
			got = append(got, string(m.Body))
		}
		return err == nil && len(got) > 0
	})
	if got[0] != "v1:after-rollback" {
		t.Errorf("output after the rollback %q, want v1's", got)
	}
	c.actions++
	b.shot("binding-rolled-back")

	deadLetters(t, e, b, c)
	crossTenant(t, e, b, c)

	// Logout ends the session: the console sends the browser to the login page again.
	b.do("logout", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login")))
	b.open("/console/", "#login")
	c.actions++
	// The host token sees every tenant.
	b.do("login as host", chromedp.SetValue(chromedp.CSS("#token"), hostToken), chromedp.Click(chromedp.CSS("#login-button")))
	b.waitFor("host overview", `document.querySelector('tr[data-key="beta/secret"]') && document.querySelector('tr[data-key="acme/echo"]')`)
	c.actions++
	b.shot("overview-host")
	b.waitFor("host memory panel", `(() => { const h = document.querySelector("#host-memory tbody tr"); `+
		`return h && h.querySelector(".resident").textContent.endsWith("iB") && h.querySelector(".source").textContent !== "" && `+
		`document.querySelector('#tenant-memory tr[data-tenant="beta"]') && `+
		`document.querySelector('#tenant-memory tr[data-tenant="acme"] .limit').textContent === "512 MiB" && +document.getElementById("tenant-memory").dataset.updates >= 2; })()`)
	b.do("scroll to memory", chromedp.ScrollIntoView(chromedp.CSS("#tenant-memory")))
	b.shot("overview-host-memory")

	select {
	case m := <-b.dialogs:
		c.escape(t, false, "a JavaScript dialog opened (%q): page content ran as script", m)
	default:
		c.escape(t, true, "")
	}
	escaped := c.escapes >= 3 && !c.escapeFailed
	fmt.Printf("console e2e: pages=%d actions=%d cross-tenant-denied=%d escaped=%t\n", len(c.pages), c.actions, c.denied, escaped)
	fmt.Printf("console e2e screenshots (%d): %s\n", len(b.saved), b.shots)
	for _, p := range b.saved {
		t.Log(p)
	}
}

// memoryPanel: acme's overview shows its memory budget, live (redrawn from the stream), and
// neither the host's budget nor beta's.
func memoryPanel(t *testing.T, b *browser, c *tally) {
	t.Helper()
	row := `document.querySelector('#tenant-memory tr[data-tenant="acme"]')`
	b.waitFor("acme's memory budget, live", `(() => { const r = `+row+`; return r && r.querySelector(".limit").textContent === "512 MiB" && `+
		`/%$/.test(r.querySelector(".pct").textContent) && r.querySelector("meter") && +document.getElementById("tenant-memory").dataset.updates >= 2; })()`)
	var got struct {
		Reserved, Instances string
		Host                bool
		Tenants             []string
	}
	b.eval("memory panel", `({Reserved: `+row+`.querySelector(".reserved .bytes").textContent, Instances: `+row+`.querySelector(".instances").textContent, `+
		`Host: !!document.getElementById("host-memory"), Tenants: [...document.querySelectorAll("#tenant-memory tbody tr")].map(r => r.dataset.tenant)})`, &got)
	if !strings.HasSuffix(got.Reserved, "B") || !strings.HasSuffix(got.Instances, "B") {
		t.Errorf("acme's reserved memory %q, instances %q: want bytes in B/KiB/MiB", got.Reserved, got.Instances)
	}
	if got.Host {
		t.Error("acme's overview shows the host's memory budget")
	}
	if strings.Join(got.Tenants, ",") != "acme" {
		t.Errorf("acme's memory panel lists tenants %v, want acme only", got.Tenants)
	}
	c.denyIf(t, "memory panel", !got.Host && !strings.Contains(strings.Join(got.Tenants, ","), "beta"))
	b.shot("overview-memory")
}

// checkSessionCookie: the session cookie is HttpOnly and SameSite=Strict, document.cookie
// cannot read it, and the token is nowhere in the URL.
func checkSessionCookie(t *testing.T, b *browser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, ck := range res.Cookies {
		if ck.Name == "wqhost_console" {
			found = true
			if !ck.HTTPOnly || ck.SameSite != network.CookieSameSiteStrict || strings.Contains(ck.Value, acmeToken) {
				t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, an opaque id", ck)
			}
		}
	}
	if !found {
		t.Fatal("no session cookie after login")
	}
	var seen struct{ Cookie, URL string }
	b.eval("cookie and URL", `({Cookie: document.cookie, URL: location.href})`, &seen)
	if strings.Contains(seen.Cookie, "wqhost_console") || strings.Contains(seen.URL, acmeToken) {
		t.Errorf("scripts see %q, URL %q: the session must stay out of reach", seen.Cookie, seen.URL)
	}
}

func digest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256Hex(b)
}

// rowsJS counts the dead-letter list's rows.
const rowsJS = `document.querySelectorAll("#deadletters tbody tr td.body").length`

// deadLetters: the list (a <script> body shown as text), a filter, a dry run and a redrive
// with its progress, a purge after a confirmation, and a message's detail.
func deadLetters(t *testing.T, e *e2eHost, b *browser, c *tally) {
	t.Helper()
	e.send(t, "acme", "jobs", "fail:order-1", "fail:order-2", "fail:order-3", scriptBody, "fail:other-1", "fail:other-2")
	e.send(t, "beta", "in", "fail:beta-secret")
	eventually(t, "6 dead letters of acme/jobs and 1 of beta/secret", time.Minute, func() bool {
		return e.deadDepth(t, "acme", "jobs") == 6 && e.deadDepth(t, "beta", "secret") == 1
	})
	list := "/console/tenants/acme/queues/jobs/deadletters"
	b.open(list, "#deadletters")
	c.page("deadletters")
	b.waitFor("6 dead letters listed", rowsJS+` === 6`)
	var bodies []struct {
		Text     string
		Children int
	}
	b.eval("bodies", `[...document.querySelectorAll("#deadletters td.body")].map(td => ({Text: td.textContent, Children: td.children.length}))`, &bodies)
	var shown bool
	for _, x := range bodies {
		if x.Text == scriptShown && x.Children == 0 {
			shown = true
		}
	}
	c.escape(t, shown, "the body %s is not shown as text in the list: %+v", scriptShown, bodies)
	b.shot("deadletters")

	b.do("filter", chromedp.SetValue(chromedp.CSS("#f-body"), "order"), chromedp.Click(chromedp.CSS("#apply")))
	b.waitFor("filtered list", rowsJS+` === 3 && location.search.includes("body=order")`)
	c.page("deadletters-filtered")
	b.do("dry run", chromedp.Click(chromedp.CSS("#count")))
	b.waitFor("dry-run count", `document.getElementById("count-result").dataset.count === "3"`)
	c.actions++
	b.shot("deadletters-dry-run")
	b.do("redrive", chromedp.SetValue(chromedp.CSS("#rate"), "50"), chromedp.Click(chromedp.CSS("#redrive")))
	b.waitFor("redrive done", `(() => { const s = document.getElementById("job-state").dataset.state; return s && s !== "running" && s !== "pending"; })()`)
	var job struct{ State, Text string }
	b.eval("redrive state", `({State: document.getElementById("job-state").dataset.state, Text: document.getElementById("job-state").textContent})`, &job)
	if !strings.Contains(job.Text, "3 of 3 redriven") {
		t.Errorf("redrive ended %q (%s), want 3 of 3 redriven", job.State, job.Text)
	}
	c.actions++
	b.shot("deadletters-redriven")

	b.open(list+"?body=other", "#deadletters")
	b.waitFor("other filter", rowsJS+` === 2`)
	b.do("dry run before purge", chromedp.Click(chromedp.CSS("#count")))
	b.waitFor("purge count", `document.getElementById("count-result").dataset.count === "2"`)
	b.do("purge asks", chromedp.Click(chromedp.CSS("#purge")), chromedp.WaitVisible(chromedp.CSS("#confirm")))
	b.waitFor("confirmation shows the count", `document.getElementById("confirm-text").textContent.includes("Purge 2 dead letters")`)
	b.shot("deadletters-purge-confirm")
	b.do("purge", chromedp.Click(chromedp.CSS("#confirm-yes")))
	b.waitFor("purged", `document.getElementById("action-result").dataset.purged === "2"`)
	c.actions++
	code, body := e.api(t, "POST", "/v1/tenants/acme/queues/jobs/deadletters/count", hostToken, `{"filter":{"body":"other"}}`)
	if code != 200 || !strings.Contains(string(body), `"count": 0`) && !strings.Contains(string(body), `"count":0`) {
		t.Errorf("after the purge, dead letters with body other: %d %s, want a count of 0", code, body)
	}

	// Detail of the <script> message: shown as text, metering attributes listed generically.
	b.open(list+"?body=script", "#deadletters")
	b.waitFor("script row", rowsJS+` === 1`)
	b.do("open detail", chromedp.Click(chromedp.CSS("#deadletters tbody a")), chromedp.WaitVisible(chromedp.CSS("#body")))
	c.page("deadletter-detail")
	var detail struct {
		Body     string
		Children int
		Scripts  int
	}
	b.eval("detail body", `({Body: document.getElementById("body").textContent, Children: document.getElementById("body").children.length, Scripts: document.querySelectorAll("main script").length})`, &detail)
	c.escape(t, detail.Body == scriptShown && detail.Children == 0 && detail.Scripts == 0,
		"detail shows the body as %+v, want the text %s", detail, scriptShown)
	b.shot("deadletter-detail")
}

// crossTenant: as acme, every way to beta's data is refused, and beta's dead letter is
// still there afterwards.
func crossTenant(t *testing.T, e *e2eHost, b *browser, c *tally) {
	t.Helper()
	code, body := e.api(t, "GET", "/v1/tenants/beta/queues/in/deadletters?limit=1", hostToken, "")
	var list struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); code != 200 || err != nil || len(list.Items) != 1 {
		t.Fatalf("beta's dead letters as the host: %d %s", code, body)
	}
	betaID := list.Items[0].ID
	for _, p := range []string{
		"/console/tenants/beta/bindings/secret",
		"/console/tenants/beta/queues/in/deadletters",
		"/console/tenants/beta/queues/in/deadletters/" + betaID,
	} {
		b.open(p, "#error")
		var got string
		b.eval("error code", `document.getElementById("error").dataset.code`, &got)
		c.denyIf(t, "page "+p+" (error "+got+")", got == "403")
	}
	b.shot("cross-tenant-denied")
	dl := "/console/api/tenants/beta/queues/in/deadletters"
	for _, f := range []struct{ what, path, init string }{
		{"rollback form", "/console/tenants/beta/bindings/secret/rollback",
			`{method: "POST", body: new URLSearchParams({csrf: document.querySelector('meta[name="csrf-token"]').content, confirm: "yes"})}`},
		{"api binding", "/console/api/tenants/beta/bindings/secret", `{}`},
		{"api rollback", "/console/api/tenants/beta/bindings/secret/rollback", post(`{}`)},
		{"api status", "/console/api/status?tenant=beta", `{}`},
		{"api list", dl, `{}`},
		{"api detail", dl + "/" + betaID, `{}`},
		{"api count", dl + "/count", post(`{"filter":{}}`)},
		{"api redrive", dl + "/redrive", post(`{"filter":{},"rate":10,"expect":1}`)},
		{"api purge", dl + "/purge", post(`{"filter":{},"expect":1}`)},
	} {
		c.deny(t, f.what, b.fetchStatus(f.what, f.path, f.init))
	}
	// The live stream carries acme's rows only.
	var first string
	b.eval("stream", `(async () => { const r = await fetch("/console/events"); const rd = r.body.getReader(); let s = "";
		while (!s.includes("\n\n")) { const {value, done} = await rd.read(); if (done) break; s += new TextDecoder().decode(value); }
		rd.cancel(); return s; })()`, &first)
	if !strings.Contains(first, `"tenant":"acme"`) {
		t.Errorf("first event of the stream %q has no acme row", first)
	}
	c.denyIf(t, "live stream", !strings.Contains(first, "beta"))
	// The admin API itself, with acme's token.
	for _, a := range []struct{ method, path, body string }{
		{"GET", "/v1/tenants/beta/bindings/secret", ""},
		{"POST", "/v1/tenants/beta/bindings/secret/rollback", ""},
		{"GET", "/v1/tenants/beta/queues/in/deadletters", ""},
		{"POST", "/v1/tenants/beta/queues/in/deadletters/purge", `{"filter":{},"expect":1}`},
	} {
		code, _ := e.api(t, a.method, a.path, acmeToken, a.body)
		c.deny(t, "API "+a.method+" "+a.path, code)
	}
	// A state change without the CSRF token is refused too (not counted: same tenant).
	if code := b.fetchStatus("no csrf", "/console/api/tenants/acme/queues/jobs/deadletters/count", `{method: "POST", body: "{}"}`); code != 403 {
		t.Errorf("POST without the CSRF token: %d, want 403", code)
	}
	if n := e.deadDepth(t, "beta", "secret"); n != 1 {
		t.Errorf("beta's dead letters after acme's attempts: %d, want 1", n)
	}
}
