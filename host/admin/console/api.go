package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
)

// maxAPIAnswer bounds an answer of the admin API the console reads: the pages ask for
// bounded pages of size-capped previews, so a larger one is an error, not a page.
const maxAPIAnswer = 8 << 20

// recorder is the http.ResponseWriter of an in-process API call.
type recorder struct {
	h    http.Header
	code int
	buf  bytes.Buffer
	over bool
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.buf.Len()+len(b) > maxAPIAnswer {
		r.over = true
		return 0, fmt.Errorf("answer above %d bytes", maxAPIAnswer)
	}
	return r.buf.Write(b)
}

// apiError is an answer of the API other than 2xx: its status and its error text.
type apiError struct {
	Code int
	Msg  string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Msg)
}

// call runs one request of the admin API as s, and returns its status, header and body.
func (c *Console) call(ctx context.Context, s *session, method, target string, body io.Reader) *recorder {
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	rec := &recorder{h: http.Header{}}
	if err != nil {
		rec.code = http.StatusBadRequest
		rec.buf.WriteString(`{"error":"bad request"}`)
		return rec
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Body = http.NoBody // as a server's request has
	}
	req.RemoteAddr = "console"
	c.opts.API.ServeHTTP(rec, req)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	if rec.over {
		rec.code = http.StatusBadGateway
	}
	if rec.code == http.StatusUnauthorized {
		// The token was revoked (a config reload): the session ends with it.
		c.end(s)
	}
	return rec
}

// getJSON runs GET target as s and decodes its JSON answer into v; an answer other than
// 200 is an *apiError.
func (c *Console) getJSON(ctx context.Context, s *session, target string, v any) error {
	rec := c.call(ctx, s, http.MethodGet, target, nil)
	if rec.code != http.StatusOK {
		return &apiError{Code: rec.code, Msg: errorText(rec.buf.Bytes())}
	}
	if err := json.Unmarshal(rec.buf.Bytes(), v); err != nil {
		return &apiError{Code: http.StatusBadGateway, Msg: "decoding the API's answer: " + err.Error()}
	}
	return nil
}

// errorText is the "error" of an API error answer, or its start.
func errorText(b []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.TrimSpace(string(b))
}

// proxy serves /console/api/<rest> as the admin API's /v1/<rest>, as the session: the
// console's scripts reach the API without ever holding the token.
func (c *Console) proxy(w http.ResponseWriter, r *http.Request, s *session) {
	p := path.Clean("/v1/" + strings.TrimPrefix(r.URL.EscapedPath(), "/console/api/"))
	if !strings.HasPrefix(p, "/v1/") {
		http.Error(w, "not an API path", http.StatusNotFound)
		return
	}
	target := (&urlPath{p, r.URL.RawQuery}).String()
	var body io.Reader
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		body = r.Body
	}
	rec := c.call(r.Context(), s, r.Method, target, body)
	if ct := rec.h.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(rec.code)
	_, _ = w.Write(rec.buf.Bytes())
}

type urlPath struct{ path, query string }

func (u *urlPath) String() string {
	if u.query == "" {
		return u.path
	}
	return u.path + "?" + u.query
}
