package console

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/admin"
)

// loginDirect logs token in through the console's handler and returns the answer's code
// and session cookie ("" without one).
func loginDirect(t *testing.T, con *Console, token string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "/console/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	con.ServeHTTP(rec, req)
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == cookieName {
			return rec.Code, ck.Value
		}
	}
	return rec.Code, ""
}

// pageWith asks for the overview with a session cookie and returns the answer's code.
func pageWith(con *Console, cookie string) int {
	req := httptest.NewRequest("GET", "/console/api/status", nil)
	req.AddCookie(&http.Cookie{Name: cookieName, Value: cookie})
	rec := httptest.NewRecorder()
	con.ServeHTTP(rec, req)
	return rec.Code
}

// One token's logins cannot lock anyone out: past its own cap each login of tenant acme
// still succeeds and ends acme's oldest session (whose cookie is refused from then on), and
// after acme logged in 1,000 times tenant beta and the host admin log in and keep their
// sessions. The table stays within its caps throughout.
func TestSessionCapsPerToken(t *testing.T) {
	for _, tc := range []struct {
		name          string
		max, perToken int
	}{
		{"defaults", 0, 0},
		{"table smaller than the tokens' caps together", 3, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			con := New(Options{API: fakeAPI(t), Tokens: func() admin.Tokens { return testTokens },
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Interval: time.Hour,
				MaxSessions: tc.max, MaxSessionsPerToken: tc.perToken})
			t.Cleanup(con.Close)
			perToken, maxTable := con.opts.MaxSessionsPerToken, con.opts.MaxSessions

			var acme []string
			for i := range 1000 {
				code, ck := loginDirect(t, con, "acme-tok")
				if code != http.StatusSeeOther || ck == "" {
					t.Fatalf("acme login %d: %d, cookie %q; want 303 and a session", i+1, code, ck)
				}
				acme = append(acme, ck)
				if n := len(con.sessions); n > maxTable || n > perToken {
					t.Fatalf("after acme login %d the table holds %d sessions; caps %d per token, %d in all", i+1, n, perToken, maxTable)
				}
			}
			if got := pageWith(con, acme[0]); got != http.StatusUnauthorized {
				t.Errorf("acme's first (evicted) session: %d, want 401", got)
			}
			if got := pageWith(con, acme[999-perToken]); got != http.StatusUnauthorized {
				t.Errorf("acme's newest evicted session: %d, want 401", got)
			}
			if got := pageWith(con, acme[999]); got != http.StatusOK {
				t.Errorf("acme's newest session: %d, want 200", got)
			}

			var others []string
			for _, tok := range []string{"beta-tok", "host-tok"} {
				code, ck := loginDirect(t, con, tok)
				if code != http.StatusSeeOther || ck == "" {
					t.Fatalf("%s after acme's 1,000 logins: %d, want 303 and a session", tok, code)
				}
				others = append(others, ck)
			}
			// acme goes on logging in: beta's and the host's sessions stay.
			for range 100 {
				loginDirect(t, con, "acme-tok")
			}
			for i, ck := range others {
				if got := pageWith(con, ck); got != http.StatusOK {
					t.Errorf("session %d of beta/host after acme's further logins: %d, want 200", i, got)
				}
			}
			if n := len(con.sessions); n > maxTable {
				t.Errorf("the table holds %d sessions, cap %d", n, maxTable)
			}
		})
	}
}
