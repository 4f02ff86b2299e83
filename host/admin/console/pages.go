package console

import (
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// page is what every page's template gets.
type page struct {
	Title string
	Who   string
	CSRF  string
	// Error is an API error the page shows instead of (or above) its content.
	Error *apiError
	Data  any
	// Host is the binary and config state every page's header and banner show.
	Host HostInfo
}

func (c *Console) page(w http.ResponseWriter, r *http.Request, s *session, name, title string, data any, err error) {
	p := page{Title: title, Who: s.who(), CSRF: s.csrf, Data: data, Host: c.hostInfo(r.Context(), s)}
	code := http.StatusOK
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{Code: http.StatusInternalServerError, Msg: err.Error()}
		}
		p.Error, code = ae, ae.Code
	}
	c.render(w, code, name, p)
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	offset = max(offset, 0)
	snap, err := c.snapshot(r.Context(), s, offset)
	data := map[string]any{"Snap": snap, "Offset": offset, "PageSize": overviewPageSize}
	if offset > 0 {
		data["Prev"] = max(offset-overviewPageSize, 0)
	}
	if offset+overviewPageSize < snap.Total {
		data["Next"] = offset + overviewPageSize
	}
	c.page(w, r, s, "overview", "Overview", data, err)
}

// versionRecord is one entry of a binding's hot-swap history (host.VersionRecord).
type versionRecord struct {
	Digest      string     `json:"digest"`
	Cause       string     `json:"cause"`
	SwappedIn   time.Time  `json:"swapped_in"`
	SwappedOut  *time.Time `json:"swapped_out"`
	Serving     bool       `json:"serving"`
	Processed   uint64     `json:"processed"`
	Failed      uint64     `json:"failed"`
	FailureRate float64    `json:"failure_rate"`
	Rollback    bool       `json:"rollback_target"`
}

// bindingDetail is GET /v1/tenants/{t}/bindings/{b} (host.BindingDetail).
type bindingDetail struct {
	Tenant  string          `json:"tenant"`
	Binding string          `json:"binding"`
	Status  bindingStatus   `json:"status"`
	History []versionRecord `json:"history"`
	Scaling []struct {
		At      time.Time `json:"at"`
		Depth   int64     `json:"depth"`
		Workers int       `json:"workers"`
		Desired int       `json:"desired"`
	} `json:"scaling"`
	Idle struct {
		EmptyReceives      uint64  `json:"empty_receives"`
		CallsPerHour       float64 `json:"calls_per_hour"`
		Push               bool    `json:"push"`
		BudgetCallsPerHour int     `json:"budget_calls_per_hour"`
		BudgetBindings     int     `json:"budget_bindings"`
		BoundMs            float64 `json:"bound_ms"`
	} `json:"idle"`
	RolledBackFrom string `json:"rolled_back_from"`
}

// scalingWindow is how far back the binding page lists scaling decisions.
const scalingWindow = 15 * time.Minute

func (c *Console) bindingPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.showBinding(w, r, s, r.URL.Query().Get("done"), nil)
}

func (c *Console) showBinding(w http.ResponseWriter, r *http.Request, s *session, notice string, actionErr error) {
	t, b := r.PathValue("tenant"), r.PathValue("binding")
	var d bindingDetail
	err := c.getJSON(r.Context(), s, "/v1/tenants/"+url.PathEscape(t)+"/bindings/"+url.PathEscape(b), &d)
	if err == nil {
		err = actionErr
	}
	var recent []any
	for i := len(d.Scaling) - 1; i >= 0; i-- {
		if time.Since(d.Scaling[i].At) <= scalingWindow {
			recent = append(recent, d.Scaling[i])
		}
	}
	var target *versionRecord
	for i := range d.History {
		if d.History[i].Rollback {
			target = &d.History[i]
		}
	}
	c.page(w, r, s, "binding", t+" / "+b, map[string]any{
		"Tenant": t, "Binding": b, "D": d, "Scaling": recent, "Target": target, "Notice": notice,
	}, err)
}

// rollback re-activates the binding's previous module version through the API, once the
// user confirmed it, and shows the binding page again.
func (c *Console) rollback(w http.ResponseWriter, r *http.Request, s *session) {
	t, b := r.PathValue("tenant"), r.PathValue("binding")
	if r.PostFormValue("confirm") != "yes" {
		// The page's form asks first (Roll back to …? Yes): a post without the answer is
		// not one a user confirmed.
		c.showBinding(w, r, s, "", &apiError{Code: http.StatusBadRequest, Msg: "rollback: not confirmed (answer the question under Roll back)"})
		return
	}
	rec := c.call(r.Context(), s, http.MethodPost, "/v1/tenants/"+url.PathEscape(t)+"/bindings/"+url.PathEscape(b)+"/rollback", strings.NewReader("{}"))
	if rec.code != http.StatusOK {
		c.showBinding(w, r, s, "", &apiError{Code: rec.code, Msg: "rollback: " + errorText(rec.buf.Bytes())})
		return
	}
	http.Redirect(w, r, "/console/tenants/"+url.PathEscape(t)+"/bindings/"+url.PathEscape(b)+"?done=rolled+back", http.StatusSeeOther)
}

// deadLetter is one item of the dead-letter API.
type deadLetter struct {
	ID             string         `json:"id"`
	Reason         string         `json:"reason"`
	DequeueCount   int64          `json:"dequeue_count"`
	DeadLetteredAt time.Time      `json:"dead_lettered_at"`
	HandlerVersion string         `json:"handler_version"`
	OriginalQueue  string         `json:"original_queue"`
	OriginalID     string         `json:"original_id"`
	Size           int64          `json:"size"`
	Body           *string        `json:"body"`
	BodyBase64     *string        `json:"body_base64"`
	Truncated      bool           `json:"truncated"`
	Attributes     map[string]any `json:"attributes"`
}

// Preview is the body as shown: its text, or its base64 when it is not text.
func (d deadLetter) Preview() string {
	switch {
	case d.Body != nil:
		return *d.Body
	case d.BodyBase64 != nil:
		return "base64: " + *d.BodyBase64
	}
	return ""
}

// Metering is the wqhost.* attributes other than those the page shows in its own rows
// (what the host measured of the message, such as wqhost.fuel), sorted.
func (d deadLetter) Metering() [][2]string { return attrs(d.Attributes, true) }

// Attempt is one attempt of a dead letter's history (the host's wqhost.attempts attribute,
// docs/metering.md).
type Attempt struct {
	At      time.Time `json:"at"`
	WallUs  int64     `json:"wall_us"`
	Fuel    uint64    `json:"fuel"`
	Outcome string    `json:"outcome"`
	Reason  string    `json:"reason"`
}

// Attempts is the attempts the host recorded of the message, oldest first; none when it
// recorded none or the attribute does not parse (the raw text is still in Metering).
func (d deadLetter) Attempts() []Attempt {
	s, _ := d.Attributes[attemptsAttr].(string)
	var as []Attempt
	if json.Unmarshal([]byte(s), &as) != nil {
		return nil
	}
	return as
}

// Other is the other attributes, sorted.
func (d deadLetter) Other() [][2]string { return attrs(d.Attributes, false) }

// Dead-letter page sizes: a list page's rows and their preview bytes, a detail's preview.
const (
	listPageSize     = 50
	listPreviewBytes = 120
	detailBodyBytes  = 4096
)

// filterKeys are the dead-letter filters the page passes through to the API.
var filterKeys = []string{"reason", "version", "since", "until", "body"}

func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, s *session) {
	t, q := r.PathValue("tenant"), r.PathValue("queue")
	in := r.URL.Query()
	f := map[string]string{}     // the filter in force, for the API and the actions
	shown := map[string]string{} // every field, for the form
	api := url.Values{"limit": {strconv.Itoa(listPageSize)}, "body_bytes": {strconv.Itoa(listPreviewBytes)}}
	for _, k := range filterKeys {
		v := strings.TrimSpace(in.Get(k))
		shown[k] = v
		if v == "" {
			continue
		}
		if k == "since" || k == "until" {
			v = rfc3339(v)
		}
		f[k], shown[k] = v, v
		api.Set(k, v)
	}
	if a := in.Get("after"); a != "" {
		api.Set("after", a)
	}
	var list struct {
		Items []deadLetter `json:"items"`
		Next  string       `json:"next"`
	}
	base := "/v1/tenants/" + url.PathEscape(t) + "/queues/" + url.PathEscape(q) + "/deadletters"
	err := c.getJSON(r.Context(), s, base+"?"+api.Encode(), &list)
	var next string
	if list.Next != "" {
		nv := url.Values{"after": {list.Next}}
		for k, v := range f {
			nv.Set(k, v)
		}
		next = "?" + nv.Encode()
	}
	c.page(w, r, s, "deadletters", t+" / "+q+" dead letters", map[string]any{
		"Tenant": t, "Queue": q, "Items": list.Items, "Next": next, "Filter": shown,
		"FilterJSON": string(mustJSON(f)), "API": "/console/api" + strings.TrimPrefix(base, "/v1"),
		"Paged": in.Get("after") != "",
	}, err)
}

func (c *Console) deadLetter(w http.ResponseWriter, r *http.Request, s *session) {
	t, q, id := r.PathValue("tenant"), r.PathValue("queue"), r.PathValue("id")
	var d deadLetter
	target := "/v1/tenants/" + url.PathEscape(t) + "/queues/" + url.PathEscape(q) + "/deadletters/" + url.PathEscape(id) +
		"?body_bytes=" + strconv.Itoa(detailBodyBytes)
	err := c.getJSON(r.Context(), s, target, &d)
	c.page(w, r, s, "deadletter", "dead letter "+id, map[string]any{"Tenant": t, "Queue": q, "D": d, "Cap": detailBodyBytes}, err)
}

// rfc3339 reads a time from a datetime-local input (taken as UTC) or RFC 3339; anything
// else is passed on for the API to refuse with its own message.
func rfc3339(v string) string {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return v
}

var funcs = template.FuncMap{
	"short": short,
	"inc":   func(i int) int { return i + 1 },
	"pct": func(f float64) string {
		return strconv.FormatFloat(f*100, 'f', 1, 64) + "%"
	},
	"num": func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"local": func(v string) string { // an RFC 3339 filter value as a datetime-local input's
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t.UTC().Format("2006-01-02T15:04:05")
		}
		return v
	},
	"path":   url.PathEscape,
	"capped": capped,
	"vis":    visible,
}

// capped is s cut to at most n bytes, on a character boundary.
func capped(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
