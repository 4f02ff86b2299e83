package handlers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/examples/handlers"
	"github.com/wqhost/wqhost/runtime"
)

// TestExtismVowels runs the Extism-ABI example in wqhost's runtime as a binding would load
// it (detected from its imports): the output of Extism's count_vowels, the running total
// kept in the instance's var, the config, and an error_set failure.
func TestExtismVowels(t *testing.T) {
	ctx := context.Background()
	wasm, err := handlers.Module("extism-vowels-tinygo")
	if err != nil {
		t.Fatal(err)
	}
	e, err := runtime.NewEngine(ctx, runtime.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(ctx) })
	m, err := e.Compile(ctx, "extism-vowels-tinygo.wasm", wasm, runtime.ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	if m.ABI() != runtime.ABIExtism {
		t.Fatalf("abi %s, want extism (detected)", m.ABI())
	}
	ten, err := e.Tenant("t", runtime.TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		config map[string]string
		calls  []string // bodies, then the outputs they give
		fail   string
	}{
		{nil, []string{"Hello, World!", `{"count":3,"total":3,"vowels":"aeiouAEIOU"}`, "", `{"count":0,"total":3,"vowels":"aeiouAEIOU"}`}, ""},
		{map[string]string{"vowels": "o"}, []string{"foo", `{"count":2,"total":2,"vowels":"o"}`}, ""},
		{nil, []string{"\xff\xfe", ""}, "(code 1): input is not UTF-8 text"},
	} {
		p, err := ten.NewPool(ctx, m, runtime.PoolConfig{Binding: "b", Function: "count_vowels", OutputQueue: "out",
			MaxInstances: 1, Timeout: 10 * time.Second, Config: tc.config})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx)
		for i := 0; i < len(tc.calls); i += 2 {
			out, err := p.Call(ctx, &runtime.Input{ID: "m", Body: []byte(tc.calls[i])})
			if tc.fail != "" {
				if !errors.Is(err, runtime.ErrPluginFailed) || !strings.Contains(err.Error(), tc.fail) {
					t.Fatalf("config %v: err %v, want ErrPluginFailed %q", tc.config, err, tc.fail)
				}
				continue
			}
			if err != nil || len(out.Outputs) != 1 || string(out.Outputs[0].Body) != tc.calls[i+1] {
				t.Fatalf("config %v body %q: %v %+v, want %s", tc.config, tc.calls[i], err, out, tc.calls[i+1])
			}
		}
	}
}
