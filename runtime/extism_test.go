package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// Hand-assembled Extism plugins (wasmtest): the ABI's edges without the module cache.

// extImports are the extism:host/env functions the test plugins import, in index order.
var extImports = []wasmtest.Import{
	{Module: extismModuleName, Name: "input_offset", Results: []byte{wasmtest.I64}},                           // 0
	{Module: extismModuleName, Name: "input_length", Results: []byte{wasmtest.I64}},                           // 1
	{Module: extismModuleName, Name: "output_set", Params: []byte{wasmtest.I64, wasmtest.I64}},                // 2
	{Module: extismModuleName, Name: "error_set", Params: []byte{wasmtest.I64}},                               // 3
	{Module: extismModuleName, Name: "alloc", Params: []byte{wasmtest.I64}, Results: []byte{wasmtest.I64}},    // 4
	{Module: extismModuleName, Name: "free", Params: []byte{wasmtest.I64}},                                    // 5
	{Module: extismModuleName, Name: "load_u64", Params: []byte{wasmtest.I64}, Results: []byte{wasmtest.I64}}, // 6
	{Module: extismModuleName, Name: "var_set", Params: []byte{wasmtest.I64, wasmtest.I64}},                   // 7
	{Module: extismModuleName, Name: "store_u8", Params: []byte{wasmtest.I64, wasmtest.I32}},                  // 8
}

const (
	xInputOffset = iota
	xInputLength
	xOutputSet
	xErrorSet
	xAlloc
	xFree
	xLoadU64
	xVarSet
	xStoreU8
)

func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// extPlugin is a plugin whose function "handle" (() -> i32) is body.
func extPlugin(body ...[]byte) []byte {
	return wasmtest.Spec{Imports: extImports, Funcs: []wasmtest.Func{
		{Export: "handle", Results: []byte{wasmtest.I32}, Body: cat(body...)},
	}}.Bytes()
}

const drop = 0x1a

// extPool loads wasm as the default ABI would (detection) and returns a pool of it.
func extPool(t *testing.T, wasm []byte, cfg PoolConfig) *Pool {
	t.Helper()
	return extPoolLimited(t, wasm, cfg, 2048)
}

// extPoolLimited is extPool in a tenant whose memory limit is pages.
func extPoolLimited(t *testing.T, wasm []byte, cfg PoolConfig, pages uint32) *Pool {
	t.Helper()
	e := testEngine(t)
	m, err := e.Compile(context.Background(), "plugin.wasm", wasm, ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	if m.ABI() != ABIExtism {
		t.Fatalf("abi %s, want %s detected from the imports", m.ABI(), ABIExtism)
	}
	ten, err := e.Tenant("acme", TenantLimits{MemoryPages: pages})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Binding == "" {
		cfg.Binding = "b"
	}
	if cfg.OutputQueue == "" {
		cfg.OutputQueue = "out"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	p, err := ten.NewPool(context.Background(), m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// TestExtismOutputAndFailure: the output goes to the binding's output queue; a non-zero code
// or an error_set fails the message with ErrPluginFailed and the plugin's reason; the pool
// keeps serving with the same instance.
func TestExtismOutputAndFailure(t *testing.T) {
	echo := cat(wasmtest.Call(xInputOffset), wasmtest.Call(xInputLength), wasmtest.Call(xOutputSet))
	for _, tc := range []struct {
		name    string
		body    []byte
		wantOut string
		wantErr string
	}{
		{"echo", cat(echo, wasmtest.I32Const(0)), "hello", ""},
		{"non-zero code", cat(echo, wasmtest.I32Const(3)), "", "extism plugin failed (code 3): no error message"},
		{"error_set", cat(echo, wasmtest.Call(xInputOffset), wasmtest.Call(xErrorSet), wasmtest.I32Const(0)), "", "extism plugin failed (code 0): hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := extPool(t, extPlugin(tc.body), PoolConfig{MinInstances: 1, MaxInstances: 1})
			for i := range 3 {
				out, err := p.Call(context.Background(), &Input{ID: "m1", Body: []byte("hello")})
				if tc.wantErr != "" {
					if !errors.Is(err, ErrPluginFailed) || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("call %d: err %v, want ErrPluginFailed with %q", i, err, tc.wantErr)
					}
					continue
				}
				if err != nil || len(out.Outputs) != 1 || out.Outputs[0].Queue != "out" || string(out.Outputs[0].Body) != tc.wantOut {
					t.Fatalf("call %d: %v %+v, want %q to out", i, err, out, tc.wantOut)
				}
			}
			if s := p.Stats(); s.Discarded != 0 || s.Instances != 1 {
				t.Fatalf("stats %+v: a plugin's own failure must not replace the instance", s)
			}
		})
	}
}

// TestExtismBadOffsetTraps: a load outside the kernel memory traps the call naming the
// function, and the next message gets a fresh instance.
func TestExtismBadOffsetTraps(t *testing.T) {
	p := extPool(t, extPlugin(wasmtest.I64Const(1<<20), wasmtest.Call(xLoadU64), []byte{drop}, wasmtest.I32Const(0)), PoolConfig{})
	for i := range 2 {
		_, err := p.Call(context.Background(), &Input{ID: "m1"})
		var hce *HostCallError
		if !errors.Is(err, ErrTrap) || !errors.As(err, &hce) || hce.Func != "extism:host/env.load_u64" {
			t.Fatalf("call %d: err %v, want a trap naming extism:host/env.load_u64", i, err)
		}
	}
	if s := p.Stats(); s.Discarded != 2 {
		t.Fatalf("discarded %d instances, want 2", s.Discarded)
	}
}

// TestExtismKernelMemoryCapped: a block past the tenant's memory limit traps instead of
// growing the host's heap.
func TestExtismKernelMemoryCapped(t *testing.T) {
	p := extPool(t, extPlugin(wasmtest.I64Const(1<<40), wasmtest.Call(xAlloc), []byte{drop}, wasmtest.I32Const(0)), PoolConfig{})
	_, err := p.Call(context.Background(), &Input{ID: "m1"})
	if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "past its limit") {
		t.Fatalf("err %v, want a trap: kernel memory past its limit", err)
	}
	// Tiny blocks without end: their records count too, so the loop hits the same limit
	// (at 20 bytes a block) instead of growing the host's memory by far more than the blocks.
	// Under a 2 MiB limit: at 128 MiB the 3.4 million host calls outlast the time limit
	// under the race detector on a loaded machine.
	p = extPoolLimited(t, extPlugin(wasmtest.Forever(wasmtest.I64Const(1), wasmtest.Call(xAlloc), []byte{drop}), wasmtest.I32Const(0)), PoolConfig{}, 32)
	_, err = p.Call(context.Background(), &Input{ID: "m2"})
	if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "past its limit") {
		t.Fatalf("tiny blocks: err %v, want a trap: kernel memory past its limit", err)
	}
}

// TestExtismVarsBounded: an instance's vars hold at most DefaultExtismVarBytes; the var_set
// that would pass it traps.
func TestExtismVarsBounded(t *testing.T) {
	// key := alloc(1); store_u8(key, c); val := alloc(600 KiB); var_set(key, val), for c = 'a', 'b'.
	// Locals are not available in wasmtest bodies: the offsets are the kernel's, known in
	// advance (blocks are allocated at 8-byte-aligned offsets from 8).
	const val = 600 << 10
	set := func(keyOff int64, c int32) []byte {
		return cat(wasmtest.I64Const(1), wasmtest.Call(xAlloc), []byte{drop},
			wasmtest.I64Const(keyOff), wasmtest.I32Const(c), wasmtest.Call(xStoreU8),
			wasmtest.I64Const(val), wasmtest.Call(xAlloc), []byte{drop},
			wasmtest.I64Const(keyOff), wasmtest.I64Const(keyOff+8), wasmtest.Call(xVarSet))
	}
	// var_set frees both blocks, the value (the last) at once: the second pair lands where
	// the first was.
	p := extPool(t, extPlugin(set(8, 'a'), set(8, 'b'), wasmtest.I32Const(0)), PoolConfig{})
	_, err := p.Call(context.Background(), &Input{ID: "m1"})
	if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "vars would hold more than") {
		t.Fatalf("err %v, want a trap: vars over %d bytes", err, DefaultExtismVarBytes)
	}
}

// TestExtismHostCallsCharged: a plugin whose loop is one costly host call (a 32 MiB block
// allocated, zeroed and freed) ends at its time limit, not when the loop's own few
// instructions have used up the fuel.
func TestExtismHostCallsCharged(t *testing.T) {
	const limit = 100 * time.Millisecond
	p := extPool(t, extPlugin(wasmtest.Forever(wasmtest.I64Const(32<<20), wasmtest.Call(xAlloc), wasmtest.Call(xFree)), wasmtest.I32Const(0)), PoolConfig{Timeout: limit})
	if !p.v.fuel {
		t.Fatalf("pool variant %+v: an Extism plugin must run under the fuel counter", p.v)
	}
	start := time.Now()
	_, err := p.Call(context.Background(), &Input{ID: "m1"})
	// The bound tells a charged loop (stopped within a pass or so of its limit) from an
	// uncharged one, which would yield only after a whole fuel allowance of passes of 32 MiB
	// each. A second past the limit was too tight beside CI's other steps under the race
	// detector (1.29 s).
	if took := time.Since(start); !errors.Is(err, ErrTimeout) || took > limit+10*time.Second {
		t.Fatalf("err %v after %s, want ErrTimeout near %s", err, took, limit)
	}
}

// TestExtismFunctionChecked: a binding naming a function the plugin lacks is refused at load,
// listing what it exports; an Extism plugin cannot take batches.
func TestExtismFunctionChecked(t *testing.T) {
	e := testEngine(t)
	m, err := e.Compile(context.Background(), "plugin.wasm", extPlugin(wasmtest.I32Const(0)), ABIExtism)
	if err != nil {
		t.Fatal(err)
	}
	ten, _ := e.Tenant("acme", TenantLimits{})
	_, err = ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Function: "count_vowels"})
	if err == nil || !strings.Contains(err.Error(), `does not export function "count_vowels"`) || !strings.Contains(err.Error(), "it exports handle") {
		t.Fatalf("err %v, want the missing function and the exports", err)
	}
	if _, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Batch: true}); err == nil || !strings.Contains(err.Error(), "one message per call") {
		t.Fatalf("batch: err %v, want a refusal", err)
	}
}
