package admin

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestQueueEndpointsRefuseBadInput: malformed bodies and query parameters of the send, peek
// and dead-letter endpoints are 400 with a message naming the field in the JSON's or the
// query's terms (never a Go type name), and nothing is sent.
func TestQueueEndpointsRefuseBadInput(t *testing.T) {
	_, api := newQueueHost(t)
	const q = "/v1/tenants/a/queues/jobs"
	cases := []struct {
		name, method, path, body, want string
	}{
		{"send: truncated JSON", "POST", q + "/messages", `{"messages": [`, "body: unexpected EOF"},
		{"send: messages not a list", "POST", q + "/messages", `{"messages": 5}`, "body: messages: got a JSON number, want a list"},
		{"send: body not text", "POST", q + "/messages", `{"messages": [{"body": 5}]}`, "body: messages.body: got a JSON number, want a string"},
		{"send: unknown field", "POST", q + "/messages", `{"mesages": [{"body": "x"}]}`, `body: json: unknown field "mesages"`},
		{"send: trailing data", "POST", q + "/messages", `{"messages": [{"body": "x"}]} {}`, "body: more after the JSON value"},
		{"send: delay beyond 7 days", "POST", q + "/messages", `{"messages": [{"body": "x"}], "delay": "2562047h"}`, `delay "2562047h": want a duration such as 10s, at most 168h0m0s`},
		{"send: negative delay", "POST", q + "/messages", `{"messages": [{"body": "x"}], "delay": "-5s"}`, `delay "-5s"`},
		{"peek: limit 0", "GET", q + "/messages?limit=0", "", `limit="0": want an integer in 1..1000`},
		{"peek: limit negative", "GET", q + "/messages?limit=-1", "", `limit="-1": want an integer in 1..1000`},
		{"peek: limit huge", "GET", q + "/messages?limit=99999999999999999999", "", "want an integer in 1..1000"},
		{"peek: body_bytes huge", "GET", q + "/messages?body_bytes=70000", "", `body_bytes="70000": want an integer in 0..65536`},
		{"dead letters: limit 0", "GET", q + "/deadletters?limit=0", "", `limit="0": want an integer in 1..1000`},
		{"dead letters: bad time", "GET", q + "/deadletters?since=yesterday", "", `since="yesterday": want an RFC 3339 time`},
		{"count: filter not an object", "POST", q + "/deadletters/count", `{"filter": 5}`, "body: filter: got a JSON number, want an object"},
		{"count: bad time", "POST", q + "/deadletters/count", `{"filter": {"since": "soon"}}`, `body: time "soon": want an RFC 3339 time`},
		{"redrive: rate beyond an int", "POST", q + "/deadletters/redrive", `{"rate": 1e30}`, "body: rate: got a JSON number 1e30, want an integer in range"},
		{"purge: negative expect", "POST", q + "/deadletters/purge", `{"expect": -5}`, "expect -5: want the count the dry run showed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			req.Header.Set("Authorization", "Bearer "+aTok)
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, req)
			var e struct{ Error string }
			_ = json.Unmarshal(rec.Body.Bytes(), &e)
			if rec.Code != 400 || !strings.Contains(e.Error, tc.want) || strings.Contains(e.Error, "Go ") {
				t.Errorf("%s %s %s: %d %s; want 400 saying %q", tc.method, tc.path, tc.body, rec.Code, rec.Body, tc.want)
			}
		})
	}
	var p struct{ Items []any }
	call(t, api, aTok, "GET", q+"/messages", nil, 200, &p)
	if len(p.Items) != 0 {
		t.Errorf("%d messages sent by refused requests", len(p.Items))
	}
}
