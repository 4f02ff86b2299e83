package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/internal/wasmtest"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// codeShapes are guests that run endlessly through 32 KiB of straight-line code, counting
// the rounds at offset 8 of their memory: one calling a straight-line function in a loop,
// one whose loop has that code as its body.
func codeShapes() []struct {
	name string
	wasm []byte
} {
	marker := wasmtest.Func{Export: "wqhost_abi_v1"}
	count := []byte{0x41, 8, 0x41, 8, 0x28, 2, 0, 0x41, 1, 0x6a, 0x36, 2, 0} // mem[8]++
	loopForever := func(body []byte) []byte {
		return concat([]byte{0x03, 0x40}, count, body, []byte{0x0c, 0x00, 0x0b, 0x00}) // loop count body br 0 end unreachable
	}
	return []struct {
		name string
		wasm []byte
	}{
		{"straight-line function called in a loop", wasmtest.Module(marker,
			wasmtest.Func{Export: "heavy", Body: wasmtest.SqrtChain(shapeBytes)},
			wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: loopForever(wasmtest.Call(1))})},
		{"huge loop body", wasmtest.Module(marker,
			wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: loopForever(wasmtest.SqrtChain(shapeBytes))})},
	}
}

const shapeBytes = 32 << 10

// TestFuelChargesCodeOfAnyShape: between two yields the guests of codeShapes run at most a
// fuel allowance's worth of code (fuel.Refill units of fuel.ChargeBytes bytes), counted by the
// guest itself: what bounds the time between two deadline checks, without a clock. With
// each check's charge capped at 64 units (instrumentation version 2), they ran about 500
// rounds, 16 MiB of code, between two yields.
func TestFuelChargesCodeOfAnyShape(t *testing.T) {
	for _, tt := range codeShapes() {
		t.Run(tt.name, func(t *testing.T) {
			yc, err := instrumentRecovered(tt.wasm)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
			defer rt.Close(ctx)
			var yields, last, most uint32
			stop := errors.New("enough yields")
			_, err = rt.NewHostModuleBuilder(hostModuleName).NewFunctionBuilder().
				WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
					rounds, _ := m.Memory().ReadUint32Le(8)
					most, last = max(most, rounds-last), rounds
					if yields++; yields == 20 {
						panic(stop)
					}
					s[0] = fuel.Refill
				}), nil, []api.ValueType{api.ValueTypeI32}).Export(fuel.YieldImport).Instantiate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m, err := rt.Instantiate(ctx, yc.wasm)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.ExportedFunction("wqhost_handle").Call(ctx); !errors.Is(err, stop) {
				t.Fatalf("call: %v, want it ended by the 20th yield", err)
			}
			if code := int(most) * shapeBytes; code > fuel.Refill*fuel.ChargeBytes {
				t.Errorf("%d rounds (%d bytes of code) between two yields, more than an allowance (%d)", most, code, fuel.Refill*fuel.ChargeBytes)
			}
		})
	}
}

// TestTimeLimitHoldsWhateverTheCodeShape: the guests of codeShapes, run by a pool, stop
// within their time limit plus 100 ms. Version 2 took 840 ms under a 300 ms limit. On a
// loaded machine one attempt of three within the bound passes (a guest can be scheduled out
// for longer than the bound); the test above holds the bound's cause without a clock.
func TestTimeLimitHoldsWhateverTheCodeShape(t *testing.T) {
	for _, tt := range codeShapes() {
		t.Run(tt.name, func(t *testing.T) {
			e := testEngine(t)
			ctx := context.Background()
			m, err := e.Compile(ctx, tt.name, tt.wasm, ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			ten, err := e.Tenant("t", TenantLimits{})
			if err != nil {
				t.Fatal(err)
			}
			const limit = 300 * time.Millisecond
			p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 1, Timeout: limit})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			if !p.v.fuel {
				t.Fatal("the module was not instrumented")
			}
			var took []time.Duration
			for len(took) < 3 {
				done := make(chan error, 1)
				start := time.Now()
				go func() {
					_, err := p.Call(context.Background(), &Input{ID: "spin", Body: []byte("x")})
					done <- err
				}()
				select {
				case err := <-done:
					took = append(took, time.Since(start))
					if !errors.Is(err, ErrTimeout) {
						t.Fatalf("err = %v, want the time limit", err)
					}
				case <-time.After(time.Minute): // far above the limit: only a guest never stopped gets here
					t.Fatal("the time limit did not stop the guest")
				}
				if took[len(took)-1] <= limit+100*time.Millisecond {
					t.Logf("ended %s after it started (limit %s)", took[len(took)-1], limit)
					return
				}
			}
			t.Errorf("the calls ended %v after they started, more than their %s limit + 100ms", took, limit)
		})
	}
}

// TestModuleOverTheMemoryLimitSaysSoAlone: a module that cannot compile for the tenant at
// all (its memory minimum over the tenant's limit) fails with its own error, without a
// warning that blames the instrumented bytes (`call --memory 1MiB` logged one first).
func TestModuleOverTheMemoryLimitSaysSoAlone(t *testing.T) {
	var buf syncBuffer
	e := engineLoggingTo(t, &buf)
	ctx := context.Background()
	wasm := wasmtest.ModuleImporting(nil, 20,
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(0)})
	m, err := e.Compile(ctx, "big.wasm", wasm, ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	ten, err := e.Tenant("t", TenantLimits{MemoryPages: 16})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ten.NewPool(ctx, m, PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 1, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "over limit of 16 pages") {
		t.Fatalf("NewPool: %v, want the memory minimum over the limit", err)
	}
	if strings.Contains(buf.String(), errInstrumentedInvalid.Error()) {
		t.Errorf("log blames the instrumented bytes: %s", buf.String())
	}
}

// TestInstrumentedModuleInvalidFallsBack: instrumented bytes that fail validation (a defect of
// the instrumenter, or a damaged cache file) are never run: the pool says so in the log,
// naming errInstrumentedInvalid, and runs the validated original under close-on-context-done.
func TestInstrumentedModuleInvalidFallsBack(t *testing.T) {
	var buf syncBuffer
	e := engineLoggingTo(t, &buf)
	ctx := context.Background()
	m, err := e.Compile(ctx, "ok.wasm", handleModule(nil, wasmtest.I32Const(0)), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	if m.c.fuel == nil {
		t.Fatal("the module was not instrumented")
	}
	m.c.fuel = &yieldCode{wasm: []byte("\x00asm\x01\x00\x00\x00\x0a\x01\x05")} // a code section that ends early
	ten, err := e.Tenant("t", TenantLimits{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 1, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if p.v.fuel || !p.v.terminate {
		t.Errorf("pool variant = %+v, want close-on-context-done without fuel", p.v)
	}
	if !strings.Contains(buf.String(), errInstrumentedInvalid.Error()) {
		t.Errorf("log %q does not name %q", buf.String(), errInstrumentedInvalid)
	}
	if _, err := p.Call(ctx, &Input{ID: "m", Body: []byte("x")}); err != nil {
		t.Errorf("call: %v", err)
	}
}

// TestInstrumentImportsOfEveryKind: a module importing a function, a table, a memory and a
// global still validates and runs instrumented. Version 2 wrote the import section's count
// as the number of imported functions plus one, which made every such module invalid.
func TestInstrumentImportsOfEveryKind(t *testing.T) {
	mod := []byte("\x00asm\x01\x00\x00\x00")
	sec := func(id byte, body ...byte) {
		mod = append(mod, id, byte(len(body)))
		mod = append(mod, body...)
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	sec(1, 1, 0x60, 0, 1, 0x7f) // type 0: () -> i32
	sec(2, concat([]byte{4},
		name("env"), name("f"), []byte{0x00, 0}, // func f: type 0
		name("env"), name("t"), []byte{0x01, 0x70, 0x00, 1}, // table t: funcref, min 1
		name("env"), name("m"), []byte{0x02, 0x00, 1}, // memory m: min 1
		name("env"), name("g"), []byte{0x03, 0x7f, 0x00}, // global g: i32, immutable
	)...)
	sec(3, 1, 0)                                   // func 1: type 0
	sec(7, 1, 3, 'r', 'u', 'n', 0x00, 1)           // export run = func 1
	sec(10, 1, 7, 0, 0x10, 0, 0x23, 0, 0x6a, 0x0b) // run: f() + g
	yc, err := instrumentRecovered(mod)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	env := []byte("\x00asm\x01\x00\x00\x00")
	env = append(env, 1, 5, 1, 0x60, 0, 1, 0x7f)           // type () -> i32
	env = append(env, 3, 2, 1, 0)                          // one function
	env = append(env, 4, 4, 1, 0x70, 0x00, 1)              // table
	env = append(env, 5, 3, 1, 0x00, 1)                    // memory
	env = append(env, 6, 6, 1, 0x7f, 0x00, 0x41, 35, 0x0b) // global = 35
	env = append(env, 7, 17, 4, 1, 'f', 0x00, 0, 1, 't', 0x01, 0, 1, 'm', 0x02, 0, 1, 'g', 0x03, 0)
	env = append(env, 10, 6, 1, 4, 0, 0x41, 7, 0x0b) // f: 7
	if _, err := rt.InstantiateWithConfig(ctx, env, wazero.NewModuleConfig().WithName("env")); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.NewHostModuleBuilder(hostModuleName).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { s[0] = fuel.Refill }),
			nil, []api.ValueType{api.ValueTypeI32}).Export(fuel.YieldImport).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, wasm := range [][]byte{mod, yc.wasm} {
		m, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatalf("instantiate (instrumented: %v): %v", len(wasm) != len(mod), err)
		}
		if res, err := m.ExportedFunction("run").Call(ctx); err != nil || res[0] != 42 {
			t.Errorf("run() = %v, %v; want 42", res, err)
		}
	}
}
