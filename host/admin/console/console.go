// Package console serves wqhost's web console under /console/ on the admin server: an
// overview of every binding kept live by Server-Sent Events, a page per binding (hot-swap
// history, rollback, scaling decisions, idle cost), and the dead letters of a queue (filter,
// dry-run count, redrive with progress, purge) with each message's detail.
//
// It is server-rendered (html/template, embedded with the binary) with a little plain
// JavaScript; there is no build step. Every figure comes from the admin API (package admin),
// called in process with the session's token, so the console authorises exactly as the API
// does: a tenant token sees and acts on its own tenant only, the host token on all.
//
// Sessions: POST /console/login takes the token in a form body (never in a URL) and sets a
// cookie holding an opaque random session id (HttpOnly, SameSite=Strict, Secure when the
// request came over TLS); the token stays on the server, in a map from session id to token,
// with an absolute expiry (Options.SessionTTL) and POST /console/logout. Sessions are capped
// per token and in all; a login past a cap ends the oldest session of its token (or of the
// token holding the most), never refused, so no token's logins lock another out. A token revoked by a
// config reload ends its sessions at their next request. Every state-changing request
// carries the session's CSRF token (form field csrf, or header X-CSRF-Token) and, when the
// browser sends one, an Origin of this host. See docs/console.md.
package console

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/wqhost/wqhost/host/admin"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Defaults of Options.
const (
	DefaultSessionTTL = 8 * time.Hour
	// DefaultMaxSessions bounds the sessions held at once, all tokens together. A login
	// beyond it ends the oldest session of the token holding the most, so the table stays
	// bounded and no token's logins can lock another token out.
	DefaultMaxSessions = 1000
	// DefaultMaxSessionsPerToken bounds the sessions of one token (the host's, or one
	// tenant's); a login beyond it ends that token's oldest session.
	DefaultMaxSessionsPerToken = 16
	// MaxStreamsPerSession and MaxStreams bound the live-update streams (SSE) open at once,
	// per session and in all; one more is refused with 429.
	MaxStreamsPerSession = 4
	MaxStreams           = 64
	// maxFormBytes bounds a console form's body.
	maxFormBytes = 16 << 10
	cookieName   = "wqhost_console"
)

// Options configure a Console.
type Options struct {
	// API is the admin API handler the console calls with the session's token.
	API http.Handler
	// Tokens returns the tokens in force (they follow config reloads); a login is checked
	// against them.
	Tokens func() admin.Tokens
	// SessionTTL is a session's lifetime from login; default DefaultSessionTTL.
	SessionTTL time.Duration
	// MaxSessions bounds the sessions held; default DefaultMaxSessions.
	MaxSessions int
	// MaxSessionsPerToken bounds the sessions of one token; default
	// DefaultMaxSessionsPerToken.
	MaxSessionsPerToken int
	// Interval is the live updates' period; default 1s.
	Interval time.Duration
	Logger   *slog.Logger
}

// Console is the web console's handler. Close ends its live-update streams (the admin
// server's shutdown calls it).
type Console struct {
	opts Options
	log  *slog.Logger
	tmpl *template.Template
	mux  *http.ServeMux

	mu       sync.Mutex
	sessions map[string]*session
	// byOwner holds each owner's live sessions (session.owner), oldest first: what a login
	// past a cap evicts.
	byOwner map[string][]*session
	streams int

	done      chan struct{}
	closeOnce sync.Once
}

// session is one login: the token stays here, the browser holds only id.
type session struct {
	id, csrf string
	token    string
	tenant   string // "" for the host
	host     bool
	owner    string // whose sessions this counts among: the host's, or one tenant's
	expires  time.Time
	done     chan struct{} // closed when the session ends (logout, expiry, revoked token)
	streams  int           // under Console.mu
	ended    bool          // under Console.mu
}

// who is how pages name the session's principal.
func (s *session) who() string {
	if s.host {
		return "host"
	}
	return "tenant " + s.tenant
}

// New returns the console. Mount it at /console/.
func New(opts Options) *Console {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.MaxSessionsPerToken <= 0 {
		opts.MaxSessionsPerToken = DefaultMaxSessionsPerToken
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Console{
		opts: opts, log: opts.Logger.With("component", "console"),
		tmpl:     template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")),
		sessions: map[string]*session{}, byOwner: map[string][]*session{}, done: make(chan struct{}),
	}
	static, _ := fs.Sub(staticFS, "static")
	m := http.NewServeMux()
	m.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /console/login", c.loginPage)
	m.HandleFunc("POST /console/login", c.login)
	m.HandleFunc("POST /console/logout", c.authed(c.logout))
	m.HandleFunc("GET /console/{$}", c.authed(c.overview))
	m.HandleFunc("GET /console/events", c.authed(c.events))
	m.HandleFunc("GET /console/tenants/{tenant}/bindings/{binding}", c.authed(c.bindingPage))
	m.HandleFunc("POST /console/tenants/{tenant}/bindings/{binding}/rollback", c.authed(c.rollback))
	m.HandleFunc("GET /console/tenants/{tenant}/queues/{queue}/deadletters", c.authed(c.deadLetters))
	m.HandleFunc("GET /console/tenants/{tenant}/queues/{queue}/deadletters/{id}", c.authed(c.deadLetter))
	m.HandleFunc("/console/api/{rest...}", c.authed(c.proxy))
	c.mux = m
	return c
}

// ServeHTTP serves the console with headers that keep its pages out of caches and frames
// and allow only its own scripts (no inline script runs, whatever a page shows).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // "no-referrer" would make form posts say Origin: null
	h.Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	c.mux.ServeHTTP(w, r)
}

// Close ends every live-update stream; it is idempotent. Sessions stay valid.
func (c *Console) Close() { c.closeOnce.Do(func() { close(c.done) }) }

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	// A host with no token at all takes any login, an empty one too: say so, or a new user
	// on the loopback default is asked for a token that does not exist.
	_, _, open := admin.Identify(c.opts.Tokens(), "")
	c.render(w, http.StatusOK, "login", map[string]any{"Error": r.URL.Query().Get("e") != "", "Open": open})
}

// login checks the posted token and opens a session for it.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin login refused", http.StatusForbidden)
		return
	}
	tok := r.PostFormValue("token")
	tenant, host, ok := admin.Identify(c.opts.Tokens(), tok)
	if !ok {
		c.log.Warn("console login refused: unknown token", "remote", r.RemoteAddr)
		c.render(w, http.StatusUnauthorized, "login", map[string]any{"Error": true})
		return
	}
	s := &session{id: randomID(), csrf: randomID(), token: tok, tenant: tenant, host: host,
		expires: time.Now().Add(c.opts.SessionTTL), done: make(chan struct{})}
	s.owner = "tenant:" + tenant
	if host {
		s.owner = "host"
	}
	c.mu.Lock()
	evicted := c.openLocked(s, time.Now())
	c.mu.Unlock()
	for _, e := range evicted {
		c.log.Info("console session ended by a newer login", "who", e.who(), "reason", "session cap")
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: s.id, Path: "/console", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: int(c.opts.SessionTTL / time.Second),
	})
	c.log.Info("console login", "who", s.who(), "remote", r.RemoteAddr)
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	c.end(s)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/console", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// end forgets s and closes its streams.
func (c *Console) end(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(s)
}

func (c *Console) endLocked(s *session) {
	if s.ended {
		return
	}
	s.ended = true
	close(s.done)
	delete(c.sessions, s.id)
	own := c.byOwner[s.owner]
	for i, o := range own {
		if o == s {
			own = append(own[:i], own[i+1:]...)
			break
		}
	}
	if len(own) == 0 {
		delete(c.byOwner, s.owner)
	} else {
		c.byOwner[s.owner] = own
	}
}

// openLocked adds s to the table, first ending what the caps require, and returns the
// sessions it ended. A login always gets its session: refusing it instead (as a full table
// once did, with 503) let one token's logins lock every other token out until they expired.
// Past its owner's cap the owner's oldest session ends; past the table's cap the oldest
// session of the owner holding the most (the login's own owner on a tie), so another
// owner's lone session ends only when the table holds more owners than its cap.
func (c *Console) openLocked(s *session, now time.Time) []*session {
	c.sweepLocked(now)
	var evicted []*session
	for len(c.byOwner[s.owner]) >= c.opts.MaxSessionsPerToken {
		old := c.byOwner[s.owner][0]
		c.endLocked(old)
		evicted = append(evicted, old)
	}
	for len(c.sessions) >= c.opts.MaxSessions {
		// Ties go against the login's own owner: its own oldest session ends rather than
		// another token's.
		most := c.byOwner[s.owner]
		for _, own := range c.byOwner {
			if len(own) > len(most) {
				most = own
			}
		}
		c.endLocked(most[0])
		evicted = append(evicted, most[0])
	}
	c.sessions[s.id] = s
	c.byOwner[s.owner] = append(c.byOwner[s.owner], s)
	return evicted
}

func (c *Console) sweepLocked(now time.Time) {
	for _, s := range c.sessions {
		if now.After(s.expires) {
			c.endLocked(s)
		}
	}
}

// lookup returns the live session of r's cookie, or nil.
func (c *Console) lookup(r *http.Request) *session {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[ck.Value]
	if s != nil && time.Now().After(s.expires) {
		c.endLocked(s)
		return nil
	}
	return s
}

type sessionHandler func(w http.ResponseWriter, r *http.Request, s *session)

// authed runs next with the request's session; without one, a page redirects to the login
// and anything else gets 401. A state-changing request needs the session's CSRF token and,
// if the browser names one, this host as its Origin (403 otherwise).
func (c *Console) authed(next sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := c.lookup(r)
		if s == nil {
			if r.Method == http.MethodGet && r.URL.Path != "/console/events" && !isAPI(r) {
				http.Redirect(w, r, "/console/login", http.StatusSeeOther)
				return
			}
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			got := r.Header.Get("X-CSRF-Token")
			if got == "" && !isAPI(r) {
				got = r.PostFormValue("csrf")
			}
			if !sameOrigin(r) || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
				http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
				return
			}
		}
		// The admin API's audit log names the console and the browser's address.
		next(w, r.WithContext(admin.ViaConsole(r.Context(), r.RemoteAddr)), s)
	}
}

func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/console/api/") }

// sameOrigin is false when the browser says the request comes from another origin.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) render(w http.ResponseWriter, code int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := c.tmpl.ExecuteTemplate(w, name, data); err != nil {
		c.log.Error("console: rendering a page", "page", name, "err", err)
	}
}
