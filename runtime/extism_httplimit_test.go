package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestHTTPResponseOverTheCapSaysSo: a response past http.max_response_bytes fails an Extism
// plugin's http_request with a reason naming the cap and its value (it was empty: the read
// that met the end of the cap delivered the bytes up to it, the next one refused without
// one).
func TestHTTPResponseOverTheCapSaysSo(t *testing.T) {
	const limit = 1024
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", 4*limit))
	}))
	defer srv.Close()
	pol := &HTTPPolicy{Allow: rules(t, "http://127.0.0.1:*"), MaxResponseBytes: limit}
	want := fmt.Sprintf("exceeds http.max_response_bytes (%d bytes)", limit)

	// handle: http_request(the input, no body); return 0.
	imports := append(append([]wasmtest.Import(nil), extImports...), wasmtest.Import{
		Module: extismModuleName, Name: "http_request", Params: []byte{wasmtest.I64, wasmtest.I64}, Results: []byte{wasmtest.I64}})
	wasm := wasmtest.Spec{Imports: imports, Funcs: []wasmtest.Func{{Export: "handle", Results: []byte{wasmtest.I32},
		Body: cat(wasmtest.Call(xInputOffset), wasmtest.I64Const(0), wasmtest.Call(len(extImports)), []byte{drop}, wasmtest.I32Const(0))}}}.Bytes()
	p := extPool(t, wasm, PoolConfig{HTTP: pol})
	desc, _ := json.Marshal(map[string]string{"url": srv.URL + "/big", "method": "GET"})
	_, err := p.Call(context.Background(), &Input{ID: "m1", Body: desc})
	if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want the call ended with %q", err, want)
	}
}
