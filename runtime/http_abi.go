package runtime

import (
	"context"
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
			s[0] = i32(st.request(st.waitCtx(ctx), methodName(method), string(u), hdr, body, string(cred)))
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
			_, hr := openHandle(ctx, uint32(s[0]))
			if hr == nil {
				s[0] = i32(errInvalid)
				return
			}
			vs := hr.resp.Header.Values(string(name))
			if len(vs) == 0 {
				s[0] = i32(errNotFound)
				return
			}
			v := strings.Join(vs, ", ")
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
			s[0] = i32(st.readBody(st.waitCtx(ctx), hr, dst))
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
		hr = st.handle(h)
	}
	return st, hr
}
