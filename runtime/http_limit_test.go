package runtime

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestHTTPWaitEndedByTheLimitFailsTheCall: a request (or a body read) that the message's time
// limit ends fails the call as a timeout, even when the guest returns ok straight after it
// (docs/abi.md, "Outbound HTTP": "when the limit ends, the request is cancelled and the call
// fails as a timeout"). The host used to return ERR_TIMEOUT and leave the end of the call to
// the guest's next fuel check: a guest returning at once, or with fuel left, ended ok after
// its limit.
func TestHTTPWaitEndedByTheLimitFailsTheCall(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	const limit = 300 * time.Millisecond
	e := testEngine(t)
	ten, err := e.Tenant("t-http-limit", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		read       bool
	}{
		{"http_request to a silent server", "/hang", false},
		{"http_body_read of a body that never ends", "/body", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := srv.URL + tc.path
			const at = 1024
			// h = http_request(GET url); [http_body_read(h, 0, 64)]; return 0 (ok).
			body := concat(call(0, 0, 0, at, int32(len(url)), 0, 0, 0, 0, 0, 0), wasmtest.Drop)
			if tc.read {
				body = concat(call(0, 0, 0, at, int32(len(url)), 0, 0, 0, 0, 0, 0), wasmtest.I32s(0, 64), wasmtest.Call(1), wasmtest.Drop)
			}
			wasm := wasmtest.Spec{
				Imports: []wasmtest.Import{wqhostFn("http_request", i32Params(10), i32Result), wqhostFn("http_body_read", i32Params(3), i32Result)},
				Funcs: []wasmtest.Func{{Export: "wqhost_abi_v1"}, {Export: "wqhost_feature_http_v1"},
					{Export: "wqhost_handle", Results: i32Result, Body: concat(body, wasmtest.I32Const(0))}},
				MemPages: 1,
				Data:     []wasmtest.Data{{Offset: at, Bytes: []byte(url)}},
			}.Bytes()
			m, err := e.Compile(context.Background(), "httplimit.wasm", wasm, ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: limit,
				HTTP: &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*"), Timeout: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			took, err := timedCall(context.Background(), p, &Input{ID: "m"})
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v after %v; want the time limit", err, took)
			}
		})
	}
}
