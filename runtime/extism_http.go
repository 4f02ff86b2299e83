package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// Extism's outbound HTTP (http_request, http_status_code, http_headers) on wqhost's requests
// (http.go): the binding's allow rules, credentials, address checks, size and time caps, and
// the tenant's open-request slots, exactly as for wqhost/v1's http_* functions. Extism's
// http_request has no error result: a refused or failed request ends the call with the
// reason http_error would give a wqhost/v1 guest, and the message is retried like any
// failure.

// extismRequest is the JSON request description an Extism PDK hands http_request.
type extismRequest struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
}

// maxExtismRequestBytes caps the request description before it is parsed.
const maxExtismRequestBytes = maxHTTPURLBytes + maxHTTPHeaderBytes + 4096

func extismHTTPFuncs() []extFn {
	return []extFn{
		{"http_request", i64x2, i64s, func(ctx context.Context, st *callState, s []uint64) {
			s[0] = st.extRequest(ctx, s[0], s[1])
		}},
		{"http_status_code", nil, i32s, func(ctx context.Context, st *callState, s []uint64) {
			s[0] = uint64(uint32(st.ext.httpStatus))
		}},
		{"http_headers", nil, i64s, func(ctx context.Context, st *callState, s []uint64) {
			if st.ext.httpHeaders == nil {
				s[0] = 0
				return
			}
			s[0] = st.newBlock(ctx, st.ext.httpHeaders)
		}},
	}
}

// extRequest sends the request described by the block at reqOff, with the block at bodyOff
// (0: none) as its body, and returns a block holding the response body (0 when empty).
func (st *callState) extRequest(ctx context.Context, reqOff, bodyOff uint64) uint64 {
	x := st.ext
	x.httpStatus, x.httpHeaders = 0, nil
	raw := x.bytes("http_request", reqOff)
	st.charge(ctx, requestCharge)
	if len(raw) > maxExtismRequestBytes {
		panic(extismTrap("http_request", "request description of %d bytes (at most %d)", len(raw), maxExtismRequestBytes))
	}
	st.charge(ctx, copyCharge(len(raw)))
	var req extismRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		panic(extismTrap("http_request", "request description is not Extism's JSON: %v", err))
	}
	var body []byte
	if bodyOff != 0 {
		body = x.bytes("http_request", bodyOff)
	}
	// Header lines as http_request's hdr argument; Wqhost-Credential names the credential.
	var hdr []byte
	cred := ""
	names := make([]string, 0, len(req.Headers))
	for k := range req.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if strings.EqualFold(k, extismUserHeader) {
			cred = req.Headers[k]
			continue
		}
		hdr = append(append(append(append(hdr, k...), ": "...), req.Headers[k]...), '\n')
	}
	method := strings.ToUpper(req.Method)
	if rc := st.oversized([]byte(method), []byte(req.URL), hdr, []byte(cred)); rc != 0 {
		panic(extismTrap("http_request", "%s", st.http.lastErr))
	}
	st.charge(ctx, copyCharge(len(req.URL)+len(hdr)+len(body)))
	wctx := st.waitCtx(ctx)
	h := st.request(wctx, methodName([]byte(method)), req.URL, hdr, body, cred)
	if h < 0 {
		panic(extismTrap("http_request", "%s", st.http.lastErr))
	}
	hr := st.handle(uint32(h))
	defer func() {
		hr.close()
		st.http.open[h-1] = nil
	}()
	x.httpStatus = int32(hr.resp.StatusCode)
	x.httpHeaders = extismHeaders(hr.resp.Header)
	var buf []byte
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, pieceBytes)
		}
		n := st.readBody(wctx, hr, buf[len(buf):min(cap(buf), len(buf)+pieceBytes)])
		if n < 0 {
			panic(extismTrap("http_request", "%s", st.http.lastErr))
		}
		if n == 0 {
			break
		}
		st.charge(ctx, copyCharge(int(n)))
		buf = buf[:len(buf)+int(n)]
	}
	// The response gets a fresh block before the request's are freed: a PDK that frees the
	// request itself afterwards must not free the response by its old offset.
	off := st.newBlock(ctx, buf)
	if bodyOff != 0 {
		st.extFree(ctx, bodyOff)
	}
	st.extFree(ctx, reqOff)
	return off
}

// extismHeaders is a response's headers as Extism hands them over: a JSON object of
// lower-case names, repeated values joined by commas.
func extismHeaders(h http.Header) []byte {
	m := make(map[string]string, len(h))
	for k, vs := range h {
		m[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	b, _ := json.Marshal(m) // a map of strings always marshals
	return b
}
