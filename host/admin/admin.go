// Package admin serves wqhost's admin HTTP API:
//
//	GET  /healthz                                  200 while the process serves (no auth)
//	GET  /readyz                                   200 once every binding's module is loaded, else 503 (no auth);
//	                                               the body says how many bindings are up of how many
//	GET  /metrics                                  Prometheus text format
//	GET  /v1/status                                JSON status of every tenant and binding;
//	                                               ?tenant=NAME filters, ?limit=N&offset=M pages over bindings
//	POST /v1/tenants/{tenant}/queues/{queue}/notify push wake-up of the binding reading the queue
//	POST /v1/reload                                reload config and modules
//	GET  /v1/tenants/{tenant}/bindings/{binding}   a binding's detail (BindingHost)
//	POST /v1/tenants/{tenant}/bindings/{binding}/rollback  previous module version (BindingHost)
//	POST|GET /v1/tenants/{tenant}/queues/{queue}/messages   send; peek (queues.go)
//	GET  /v1/tenants/{tenant}/queues/{queue}/deadletters    dead letters, paged and filtered;
//	                                               /{id}, POST /count, /redrive, /purge
//	GET|DELETE /v1/jobs/{id}                       a redrive's progress; cancel it
//
// The message, dead-letter and job endpoints are documented in docs/admin-api.md.
//
// Authentication: when any token is configured, every endpoint but /healthz and /readyz needs
// "Authorization: Bearer <token>" (the scheme in any case). The host token may do everything; a tenant token sees only
// its own tenant (status and metrics are filtered to it) and may notify only its own queues.
// A missing or unknown token is 401; a tenant token on another tenant's resource, or on
// /v1/reload, is 403. Request bodies are limited in size (413 beyond).
package admin

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/wqhost/wqhost/internal/defaults"
)

// Host is what the admin API steers.
type Host interface {
	// Readiness reports whether the host is ready and how far its start has got.
	Readiness() Readiness
	// Status returns the JSON-able status of the tenants and bindings q selects (a tenant
	// token's requests come with q.Tenant set to its own tenant).
	Status(ctx context.Context, q StatusQuery) any
	HasTenant(name string) bool
	Notify(ctx context.Context, tenant, queue string) error
	// Reload re-reads the config, modules and plugins and returns what it did (JSON-able),
	// even when part of it failed (err).
	Reload(ctx context.Context) (any, error)
	// IsNotFound classifies the errors of Notify.
	IsNotFound(err error) bool
}

// Readiness is what GET /readyz reports.
type Readiness struct {
	Ready bool
	// Starting is true while the host builds its bindings: BindingsUp of BindingsTotal are
	// built so far. Once ready both are the bindings serving.
	Starting      bool
	BindingsUp    int
	BindingsTotal int
	// Waiting lists, while starting, the bindings whose backend cannot serve yet, each as
	// "tenants.<t>.bindings.<b>: <reason>".
	Waiting []string
}

// text is the readiness as /readyz's status: "ready: N bindings", "starting: K of N
// bindings up", or "not ready: shutting down" (a host that stopped or failed to start).
func (r Readiness) text() string {
	switch {
	case r.Ready:
		return fmt.Sprintf("ready: %d bindings", r.BindingsTotal)
	case r.Starting && len(r.Waiting) > 0:
		return fmt.Sprintf("starting: %d of %d bindings up; waiting for the backend of %s", r.BindingsUp, r.BindingsTotal, strings.Join(r.Waiting, "; "))
	case r.Starting:
		return fmt.Sprintf("starting: %d of %d bindings up", r.BindingsUp, r.BindingsTotal)
	}
	return "not ready: shutting down"
}

// StatusQuery selects what GET /v1/status returns: one tenant's bindings (Tenant, "" for
// all) and a page of them in (tenant, binding) order: Limit bindings (0 = all) from Offset.
type StatusQuery struct {
	Tenant string
	Limit  int
	Offset int
	// ForTenant is set for a tenant's token: what is host-wide (the host's memory budget,
	// which sums every tenant's use) is left out.
	ForTenant bool
}

// MaxStatusLimit caps ?limit: a page is built in memory and sent whole.
const MaxStatusLimit = 100000

// parseStatusQuery reads ?tenant, ?limit and ?offset; an error is the client's (400).
func parseStatusQuery(r *http.Request) (StatusQuery, error) {
	v := r.URL.Query()
	q := StatusQuery{Tenant: v.Get("tenant")}
	for _, p := range []struct {
		name string
		dst  *int
		max  int
	}{{"limit", &q.Limit, MaxStatusLimit}, {"offset", &q.Offset, math.MaxInt32}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > p.max {
			return q, fmt.Errorf("%s=%.40q: want an integer in 0..%d", p.name, s, p.max)
		}
		*p.dst = n
	}
	return q, nil
}

// Tokens are the bearer tokens the API accepts. Empty values are not accepted tokens.
type Tokens struct {
	Host    string
	Tenants map[string]string // tenant name -> token
}

func (t Tokens) any() bool {
	if t.Host != "" {
		return true
	}
	for _, v := range t.Tenants {
		if v != "" {
			return true
		}
	}
	return false
}

// Options configure the handler.
type Options struct {
	Tokens Tokens
	// TokenSource, when set, is asked for the tokens on every request instead of Tokens:
	// a host whose config reload adds, changes or revokes tokens passes one, so a new token
	// works and a revoked one is refused from the moment the reload applies it.
	TokenSource func() Tokens
	// MaxBodyBytes limits request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxSendBytes limits the bodies of POST .../messages (a send), which carry messages:
	// the largest tenant limits.max_message_bytes, as JSON (base64) with room to spare;
	// below MaxBodyBytes it is MaxBodyBytes.
	MaxSendBytes int64
	// Gatherer serves /metrics; nil serves no metrics (404).
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
}

type server struct {
	h    Host
	opts Options
	log  *slog.Logger
}

// principal is who a request authenticated as: the host ("" tenant) or one tenant.
type principal struct {
	host   bool
	tenant string
}

// DefaultMaxBodyBytes is Options.MaxBodyBytes' default (64 KiB): admin requests are small
// JSON documents.
const DefaultMaxBodyBytes = defaults.AdminMaxBodyBytes

// New returns the admin API handler.
func New(h Host, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &server{h: h, opts: opts, log: opts.Logger}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := h.Readiness()
		code := http.StatusOK
		if !rd.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, readyzBody{Status: rd.text(), BindingsUp: rd.BindingsUp, BindingsTotal: rd.BindingsTotal, Waiting: rd.Waiting})
	})
	mux.HandleFunc("GET /metrics", s.auth(s.metrics))
	mux.HandleFunc("GET /v1/status", s.auth(s.status))
	mux.HandleFunc("POST /v1/tenants/{tenant}/queues/{queue}/notify", s.auth(s.notify))
	mux.HandleFunc("POST /v1/reload", s.auth(s.reload))
	s.routeBindings(mux)
	s.queueRoutes(mux)
	return s.limitBody(mux)
}

// limitBody rejects bodies above MaxBodyBytes (a send: MaxSendBytes) with 413 before any
// handler runs.
func (s *server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := s.bodyLimit(r)
		if r.ContentLength > limit {
			writeError(w, http.StatusRequestEntityTooLarge, "request body above %d bytes", limit)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// bodyLimit is the largest body r may have: a send's carries messages (MaxSendBytes).
func (s *server) bodyLimit(r *http.Request) int64 {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages") {
		return max(s.opts.MaxSendBytes, s.opts.MaxBodyBytes)
	}
	return s.opts.MaxBodyBytes
}

type authedHandler func(w http.ResponseWriter, r *http.Request, p principal)

func (s *server) auth(next authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="wqhost"`)
			writeError(w, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		// Read (bounded) bodies whole so that an oversized one is refused even where unused.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeError(w, http.StatusRequestEntityTooLarge, "request body above %d bytes", s.opts.MaxBodyBytes)
				return
			}
			writeError(w, http.StatusBadRequest, "reading body: %v", err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next(w, r, p)
	}
}

func (s *server) tokens() Tokens {
	if s.opts.TokenSource != nil {
		return s.opts.TokenSource()
	}
	return s.opts.Tokens
}

func (s *server) authenticate(r *http.Request) (principal, bool) {
	t := s.tokens()
	if !t.any() {
		return principal{host: true}, true
	}
	tok, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return principal{}, false
	}
	// Every token is compared (no early return, so the time taken says nothing of which
	// matched), and a token matching two principals authenticates neither: the host refuses
	// such a config (every token must be distinct), and a handler built with one must not
	// pick whichever the map yields first.
	who, n := match(t, tok)
	if n != 1 {
		if n > 1 {
			s.log.Error("admin API: a bearer token matches more than one principal; refused (every token must be distinct)")
		}
		return principal{}, false
	}
	return who, true
}

// match returns the principal tok is the token of and how many principals it matches,
// comparing every token.
func match(t Tokens, tok string) (principal, int) {
	var who principal
	n := 0
	if equal(tok, t.Host) {
		who, n = principal{host: true}, n+1
	}
	for name, v := range t.Tenants {
		if equal(tok, v) {
			who, n = principal{tenant: name}, n+1
		}
	}
	return who, n
}

// bearer is the token of an Authorization header of the Bearer scheme, whose name is
// case-insensitive (RFC 9110 11.1), followed by one or more spaces.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	return tok, tok != ""
}

func equal(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// readyzBody is GET /readyz's JSON.
type readyzBody struct {
	Status        string `json:"status"`
	BindingsUp    int    `json:"bindings_up"`
	BindingsTotal int    `json:"bindings_total"`
	// Waiting: the bindings whose backend cannot serve yet, with the reason (starting).
	Waiting []string `json:"waiting,omitempty"`
}

func (s *server) status(w http.ResponseWriter, r *http.Request, p principal) {
	q, err := parseStatusQuery(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if !p.host {
		if q.Tenant != "" && q.Tenant != p.tenant {
			writeError(w, http.StatusForbidden, "this token may not see tenant %q", q.Tenant)
			return
		}
		q.Tenant, q.ForTenant = p.tenant, true
	}
	if q.Tenant != "" && !s.h.HasTenant(q.Tenant) {
		writeError(w, http.StatusNotFound, "tenant %q is not configured", q.Tenant)
		return
	}
	writeJSON(w, http.StatusOK, s.h.Status(r.Context(), q))
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request, p principal) {
	if s.opts.Gatherer == nil {
		writeError(w, http.StatusNotFound, "no metrics")
		return
	}
	g := s.opts.Gatherer
	if !p.host {
		g = tenantGatherer{g: g, tenant: p.tenant}
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: nil}).ServeHTTP(w, r)
}

func (s *server) notify(w http.ResponseWriter, r *http.Request, p principal) {
	tenant, queue := r.PathValue("tenant"), r.PathValue("queue")
	if !p.host && p.tenant != tenant {
		writeError(w, http.StatusForbidden, "this token may not steer tenant %q", tenant)
		return
	}
	if !s.h.HasTenant(tenant) {
		writeError(w, http.StatusNotFound, "tenant %q is not configured", tenant)
		return
	}
	if err := s.h.Notify(r.Context(), tenant, queue); err != nil {
		if s.h.IsNotFound(err) {
			writeError(w, http.StatusNotFound, "%v", err)
			return
		}
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "notified", "tenant": tenant, "queue": queue})
}

func (s *server) reload(w http.ResponseWriter, r *http.Request, p principal) {
	if !p.host {
		writeError(w, http.StatusForbidden, "only the host token may reload")
		return
	}
	res, err := s.h.Reload(r.Context())
	if err != nil {
		// What did load is serving; what failed left the previous version serving.
		s.log.Error("reload through the admin API failed in part", "err", err)
		s.audit(r, p, "reload", "config and modules", reloadCount(res), "err", err)
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"status": "failed", "error": err.Error(), "result": res})
		return
	}
	s.audit(r, p, "reload", "config and modules", reloadCount(res))
	writeJSON(w, http.StatusOK, map[string]any{"status": "reloaded", "result": res})
}

// tenantGatherer keeps only the series labelled with one tenant.
type tenantGatherer struct {
	g      prometheus.Gatherer
	tenant string
}

func (t tenantGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := t.g.Gather()
	var out []*dto.MetricFamily
	for _, mf := range mfs {
		var keep []*dto.Metric
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" && l.GetValue() == t.tenant {
					keep = append(keep, m)
					break
				}
			}
		}
		if len(keep) > 0 {
			mf.Metric = keep
			out = append(out, mf)
		}
	}
	return out, err
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, args...)})
}
