package fuel

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestFuelChargesCodeOfAnyShape: between two yields the guests of wasmtest.CodeShapes run at most a
// fuel allowance's worth of code (Refill units of ChargeBytes bytes), counted by the
// guest itself: what bounds the time between two deadline checks, without a clock. With
// each check's charge capped at 64 units (instrumentation version 2), they ran about 500
// rounds, 16 MiB of code, between two yields.
func TestFuelChargesCodeOfAnyShape(t *testing.T) {
	for _, tt := range wasmtest.CodeShapes() {
		t.Run(tt.Name, func(t *testing.T) {
			yc, err := Instrument(tt.Wasm)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
			defer rt.Close(ctx)
			var yields, last, most uint32
			stop := errors.New("enough yields")
			_, err = rt.NewHostModuleBuilder(YieldModule).NewFunctionBuilder().
				WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, s []uint64) {
					rounds, _ := m.Memory().ReadUint32Le(8)
					most, last = max(most, rounds-last), rounds
					if yields++; yields == 20 {
						panic(stop)
					}
					s[0] = Refill
				}), nil, []api.ValueType{api.ValueTypeI32}).Export(YieldImport).Instantiate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m, err := rt.Instantiate(ctx, yc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.ExportedFunction("wqhost_handle").Call(ctx); !errors.Is(err, stop) {
				t.Fatalf("call: %v, want it ended by the 20th yield", err)
			}
			if code := int(most) * wasmtest.ShapeBytes; code > Refill*ChargeBytes {
				t.Errorf("%d rounds (%d bytes of code) between two yields, more than an allowance (%d)", most, code, Refill*ChargeBytes)
			}
		})
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
	sec(2, slices.Concat([]byte{4},
		name("env"), name("f"), []byte{0x00, 0}, // func f: type 0
		name("env"), name("t"), []byte{0x01, 0x70, 0x00, 1}, // table t: funcref, min 1
		name("env"), name("m"), []byte{0x02, 0x00, 1}, // memory m: min 1
		name("env"), name("g"), []byte{0x03, 0x7f, 0x00}, // global g: i32, immutable
	)...)
	sec(3, 1, 0)                                   // func 1: type 0
	sec(7, 1, 3, 'r', 'u', 'n', 0x00, 1)           // export run = func 1
	sec(10, 1, 7, 0, 0x10, 0, 0x23, 0, 0x6a, 0x0b) // run: f() + g
	yc, err := Instrument(mod)
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
	if _, err := rt.NewHostModuleBuilder(YieldModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { s[0] = Refill }),
			nil, []api.ValueType{api.ValueTypeI32}).Export(YieldImport).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, wasm := range [][]byte{mod, yc} {
		m, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatalf("instantiate (instrumented: %v): %v", len(wasm) != len(mod), err)
		}
		if res, err := m.ExportedFunction("run").Call(ctx); err != nil || res[0] != 42 {
			t.Errorf("run() = %v, %v; want 42", res, err)
		}
	}
}
