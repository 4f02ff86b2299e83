package runtime

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/tetratelabs/wazero/api"
)

// The outbound HTTP host functions of the wqhost/v1 ABI (feature http_v1, docs/abi.md): the
// glue between guest memory and the requests of http.go.
// methodName is the method as a string, without allocating for the common ones.
func methodName(b []byte) string {
	for _, m := range commonMethods {
		if string(b) == m {
			return m
		}
	}
	return string(b)
}

var commonMethods = [...]string{http.MethodPost, http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions}

func httpHostFuncs() []hostFn {
	return []hostFn{
		{"http_request", []api.ValueType{tI32, tI32, tI32, tI32, tI32, tI32, tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			method := mem(m, "http_request", uint32(s[0]), uint32(s[1]))
			u := mem(m, "http_request", uint32(s[2]), uint32(s[3]))
			hdr := mem(m, "http_request", uint32(s[4]), uint32(s[5]))
			body := mem(m, "http_request", uint32(s[6]), uint32(s[7]))
			cred := mem(m, "http_request", uint32(s[8]), uint32(s[9]))
			st := stateOf(ctx)
			if st == nil {
				s[0] = i32(errDenied)
				return
			}
			st.charge(ctx, requestCharge)
			if rc := st.oversized(method, u, hdr, cred); rc != 0 {
				s[0] = i32(rc)
				return
			}
			st.charge(ctx, copyCharge(len(u)+len(hdr)+len(body)))
			s[0] = i32(st.request(st.waitCtx(ctx), methodName(method), string(u), hdr, body, string(cred)))
			st.endIfOverdue()
		}},
		{"http_status", []api.ValueType{tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			_, hr := openHandle(ctx, uint32(s[0]))
			if hr == nil {
				s[0] = i32(errInvalid)
				return
			}
			s[0] = i32(int32(hr.resp.StatusCode))
		}},
		{"http_header", []api.ValueType{tI32, tI32, tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			name := mem(m, "http_header", uint32(s[1]), uint32(s[2]))
			dst := mem(m, "http_header", uint32(s[3]), uint32(s[4]))
			st, hr := openHandle(ctx, uint32(s[0]))
			if hr == nil || len(name) > maxHTTPNameBytes {
				s[0] = i32(errInvalid)
				return
			}
			vs := hr.resp.Header.Values(string(name))
			if len(vs) == 0 {
				s[0] = i32(errNotFound)
				return
			}
			v := strings.Join(vs, ", ")
			st.charge(ctx, copyCharge(len(v)))
			copy(dst, v)
			s[0] = i32(int32(len(v)))
		}},
		{"http_body_read", []api.ValueType{tI32, tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			dst := mem(m, "http_body_read", uint32(s[1]), uint32(s[2]))
			st, hr := openHandle(ctx, uint32(s[0]))
			if hr == nil {
				s[0] = i32(errInvalid)
				return
			}
			n := st.readBody(st.waitCtx(ctx), hr, dst)
			st.endIfOverdue()
			st.charge(ctx, copyCharge(max(int(n), 0)))
			s[0] = i32(n)
		}},
		{"http_close", []api.ValueType{tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			st, hr := openHandle(ctx, uint32(s[0]))
			if hr == nil {
				s[0] = i32(errInvalid)
				return
			}
			hr.close()
			st.http.open[uint32(s[0])-1] = nil
			s[0] = 0
		}},
		{"http_error", []api.ValueType{tI32, tI32}, []api.ValueType{tI32}, func(ctx context.Context, m api.Module, s []uint64) {
			dst := mem(m, "http_error", uint32(s[0]), uint32(s[1]))
			st := stateOf(ctx)
			st.charge(ctx, callCharge)
			if st == nil || st.http.lastErr == "" {
				s[0] = i32(errNotFound)
				return
			}
			copy(dst, st.http.lastErr)
			s[0] = i32(int32(len(st.http.lastErr)))
		}},
	}
}

// openHandle is the call state and the open response a guest's handle names; hr is nil when
// there is no call or no such open response (the host function answers ERR_INVALID).
func openHandle(ctx context.Context, h uint32) (st *callState, hr *httpResp) {
	if st = stateOf(ctx); st != nil {
		st.charge(ctx, callCharge)
		hr = st.handle(h)
	}
	return st, hr
}

// oversized refuses a request whose method, URL, header lines or credential name is past the
// host's bounds before any of them is converted or parsed (a URL of 64 MiB would be copied
// and parsed whole), with the code the same refusal gets later (request); 0 lets it through.
func (st *callState) oversized(method, u, hdr, cred []byte) int32 {
	var code int32
	var what string
	switch {
	case len(method) > maxHTTPMethodBytes:
		code, what = errInvalid, fmt.Sprintf("method of %d bytes (at most %d)", len(method), maxHTTPMethodBytes)
	case len(u) > maxHTTPURLBytes || len(hdr) > maxHTTPHeaderBytes:
		code, what = errTooLarge, fmt.Sprintf("URL (%d bytes) or header lines (%d bytes) over the host's bounds (%d, %d)", len(u), len(hdr), maxHTTPURLBytes, maxHTTPHeaderBytes)
	case len(cred) > maxHTTPNameBytes:
		code, what = errNotFound, fmt.Sprintf("credential name of %d bytes (at most %d)", len(cred), maxHTTPNameBytes)
	default:
		return 0
	}
	shown := func() string { return clip(string(u[:min(len(u), 201)]), 200) }
	return st.httpFail(code, clip(string(method[:min(len(method), 21)]), 20), shown, "", what)
}
