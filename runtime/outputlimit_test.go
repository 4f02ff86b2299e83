package runtime

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestMaxOutputBytesMeta: msg_meta's max_output_bytes is the pool's MaxOutputBytes (the
// host passes the smaller of the tenant's limit and the output queue's), in a single call
// and as a call key in a batch call; and emit refuses an output one byte above it.
func TestMaxOutputBytesMeta(t *testing.T) {
	p := &Pool{cfg: PoolConfig{MaxOutputBytes: 49152, MaxOutputs: 4, OutputQueue: "out"}, t: &Tenant{name: "acme"}}
	for _, tc := range []struct {
		name string
		in   *Input
	}{{"single call", &Input{ID: "m"}}, {"batch call", nil}} {
		st := &callState{pool: p, out: &Result{}}
		v, ok := st.meta(tc.in, "max_output_bytes", nil)
		if !ok || string(v) != "49152" {
			t.Errorf("%s: max_output_bytes = %q, %v; want 49152", tc.name, v, ok)
		}
	}
	if _, ok := (&callState{pool: p}).meta(nil, "max_output_bytes", nil); ok {
		t.Error("a self test (no call) knows max_output_bytes; docs/abi.md says no key is known there")
	}
	st := &callState{pool: p, out: &Result{}}
	var outs []Emitted
	if code := st.emit(&outs, nil, bytes.Repeat([]byte{'x'}, 49152)); code != 0 {
		t.Errorf("emit of max_output_bytes: %d, want 0", code)
	}
	if code := st.emit(&outs, nil, bytes.Repeat([]byte{'x'}, 49153)); code != errTooLarge {
		t.Errorf("emit of max_output_bytes+1: %d, want ERR_TOO_LARGE", code)
	}
}

// TestStdioMaxOutputBytesEnv: a wasi-stdio program learns the limit on its stdout from
// WQHOST_MAX_OUTPUT_BYTES.
func TestStdioMaxOutputBytesEnv(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("acme", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), load(t, e, "testdata/stdio/stdio.wasm", ABIWasiStdio),
		PoolConfig{Binding: "conv", OutputQueue: "out", Timeout: 10 * time.Second, MaxOutputBytes: 49152})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	out, err := p.Call(context.Background(), &Input{ID: "m", Body: []byte("env")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out.Outputs[0].Body), "WQHOST_MAX_OUTPUT_BYTES=49152") {
		t.Errorf("env lacks WQHOST_MAX_OUTPUT_BYTES=49152:\n%s", out.Outputs[0].Body)
	}
}

// TestCallStdioOutputPastLimitRefused: a wasi-stdio program whose stdout passes
// MaxOutputBytes fails its call with ErrOutputRefused, its text unchanged, and CallInto's
// result carries the same error as it returns.
func TestCallStdioOutputPastLimitRefused(t *testing.T) {
	e := testEngine(t)
	ten, err := e.Tenant("acme", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), load(t, e, "testdata/stdio/stdio.wasm", ABIWasiStdio),
		PoolConfig{Binding: "conv", OutputQueue: "out", Timeout: 10 * time.Second, MaxOutputBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	var out Result
	err = p.CallInto(context.Background(), &Input{ID: "m", Body: []byte("env")}, &out)
	if !errors.Is(err, ErrOutputRefused) || err.Error() != "runtime: message m: stdout exceeds 16 bytes" {
		t.Fatalf("stdout past the limit: %v; want ErrOutputRefused reading \"runtime: message m: stdout exceeds 16 bytes\"", err)
	}
	if out.Err != err {
		t.Errorf("result's Err %v; want the error CallInto returned", out.Err)
	}
}
