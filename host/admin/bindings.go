package admin

import (
	"context"
	"net/http"
)

// BindingHost is what a Host implements to serve a binding's detail and its rollback:
//
//	GET  /v1/tenants/{tenant}/bindings/{binding}           status, hot-swap history, scaling
//	                                                       decisions and idle cost (JSON)
//	POST /v1/tenants/{tenant}/bindings/{binding}/rollback  re-activate the previous module
//	                                                       version; 409 when there is none
//
// A tenant token may read and roll back its own tenant's bindings only (403 otherwise).
type BindingHost interface {
	Binding(ctx context.Context, tenant, binding string) (any, error)
	Rollback(ctx context.Context, tenant, binding string) (any, error)
	// IsConflict classifies Rollback's errors: no previous version (409).
	IsConflict(err error) bool
}

func (s *server) routeBindings(mux *http.ServeMux) {
	bh, ok := s.h.(BindingHost)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/tenants/{tenant}/bindings/{binding}", s.auth(func(w http.ResponseWriter, r *http.Request, p principal) {
		t, b := r.PathValue("tenant"), r.PathValue("binding")
		if !s.mayTenant(w, p, t) {
			return
		}
		d, err := bh.Binding(r.Context(), t, b)
		s.answer(w, d, err, bh)
	}))
	mux.HandleFunc("POST /v1/tenants/{tenant}/bindings/{binding}/rollback", s.auth(func(w http.ResponseWriter, r *http.Request, p principal) {
		t, b := r.PathValue("tenant"), r.PathValue("binding")
		if !s.mayTenant(w, p, t) {
			return
		}
		res, err := bh.Rollback(r.Context(), t, b)
		if err == nil {
			s.audit(r, p, "rollback", t+"/"+b, 1, "result", res)
		}
		s.answer(w, res, err, bh)
	}))
}

// mayTenant answers 403 or 404 and returns false unless p may act on tenant.
func (s *server) mayTenant(w http.ResponseWriter, p principal, tenant string) bool {
	if !p.host && p.tenant != tenant {
		writeError(w, http.StatusForbidden, "this token may not see tenant %q", tenant)
		return false
	}
	if !s.h.HasTenant(tenant) {
		writeError(w, http.StatusNotFound, "tenant %q is not configured", tenant)
		return false
	}
	return true
}

func (s *server) answer(w http.ResponseWriter, v any, err error, bh BindingHost) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case s.h.IsNotFound(err):
		writeError(w, http.StatusNotFound, "%v", err)
	case bh.IsConflict(err):
		writeError(w, http.StatusConflict, "%v", err)
	default:
		writeError(w, http.StatusInternalServerError, "%v", err)
	}
}

// Identify returns who tok authenticates as under tokens, as the API would: the host (host
// true; also when no token is configured at all) or one tenant. ok is false for a token
// that matches no principal, or more than one.
func Identify(tokens Tokens, tok string) (tenant string, host, ok bool) {
	if !tokens.any() {
		return "", true, true
	}
	p, n := match(tokens, tok)
	if n != 1 {
		return "", false, false
	}
	return p.tenant, p.host, true
}
