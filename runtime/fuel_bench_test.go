package runtime

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// BenchmarkFuelTightLoop: what the fuel checks cost the worst case, a counting loop with
// nothing else in it, against the same loop uninstrumented in the same run (the time-limit
// cost the Performance issue bounds). Each op is one iteration.
func BenchmarkFuelTightLoop(b *testing.B) {
	// count(n): loop n-- until 0, in the parameter's local.
	mod := wasmtest.Module(wasmtest.Func{Export: "count", Params: []byte{wasmtest.I32}, Body: []byte{
		0x03, 0x40, // loop
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, // local.get 0; i32.const 1; i32.sub; local.tee 0
		0x0d, 0x00, // br_if 0
		0x0b, // end
	}})
	yc, err := instrument(mod)
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name string
		wasm []byte
	}{{"original", mod}, {"instrumented", yc.wasm}} {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			rt := wazero.NewRuntime(ctx)
			defer rt.Close(ctx)
			_, err := rt.NewHostModuleBuilder(hostModuleName).NewFunctionBuilder().
				WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) { s[0] = fuelRefill }),
					nil, []api.ValueType{api.ValueTypeI32}).Export(yieldImport).Instantiate(ctx)
			if err != nil {
				b.Fatal(err)
			}
			m, err := rt.Instantiate(ctx, v.wasm)
			if err != nil {
				b.Fatal(err)
			}
			count := m.ExportedFunction("count")
			b.ResetTimer()
			for n := b.N; n > 0; n -= 1 << 30 {
				if _, err := count.Call(ctx, uint64(min(n, 1<<30))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
