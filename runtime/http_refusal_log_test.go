package runtime

import (
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestHTTPRefusalsLoggedOncePerCall: a guest refused 50 times in one message (here: a binding
// with no http: policy) leaves one log line for the first refusal and one summing up the rest,
// not 50: a guest looping on a refused request cannot flood the host's log.
func TestHTTPRefusalsLoggedOncePerCall(t *testing.T) {
	const url = "http://example.com/hooks"
	i32 := byte(api.ValueTypeI32)
	var body []byte
	for range 50 {
		body = append(body, wasmtest.I32s(0, 0, 0, int32(len(url)), 0, 0, 0, 0, 0, 0)...)
		body = append(body, wasmtest.Call(0)...)
		body = append(body, wasmtest.Drop...)
	}
	mod := wasmtest.Spec{
		Imports: []wasmtest.Import{{Module: "wqhost", Name: "http_request", Params: []byte{i32, i32, i32, i32, i32, i32, i32, i32, i32, i32}, Results: []byte{i32}}},
		Funcs: []wasmtest.Func{
			{Export: "wqhost_abi_v1"},
			{Export: "wqhost_feature_http_v1"},
			{Export: "wqhost_handle", Results: []byte{i32}, Body: append(body, wasmtest.I32Const(0)...)},
		},
		Data: []wasmtest.Data{{Offset: 0, Bytes: []byte(url)}},
	}.Bytes()
	logs := &syncBuffer{}
	e := engineLoggingTo(t, logs)
	ten, err := e.Tenant("acme", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(context.Background(), "refused.wasm", mod, ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "hooks", OutputQueue: "out"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	for range 2 { // the count starts again with each message
		if _, err := p.Call(context.Background(), &Input{ID: "m-1"}); err != nil {
			t.Fatal(err)
		}
	}
	got := logs.String()
	if n := strings.Count(got, "outbound http request refused"); n != 2 {
		t.Errorf("%d refusal lines for 2 messages of 50 refusals each, want 2:\n%s", n, got)
	}
	if n := strings.Count(got, "more=49"); n != 2 {
		t.Errorf("%d summary lines saying more=49, want 2:\n%s", n, got)
	}
}
