package fuel

import (
	"context"
	"fmt"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// unrollShapes are wasmtest.LoopModules and loops left other ways than by their end: by a branch to a
// block around them, and by a return.
func unrollShapes() []wasmtest.LoopModule {
	shapes := append([]wasmtest.LoopModule(nil), wasmtest.LoopModules...)
	fn := func(body ...byte) []wasmtest.Func {
		return []wasmtest.Func{{Export: "run", Params: []byte{wasmtest.I32, wasmtest.I32}, Results: []byte{wasmtest.I32}, Body: body}}
	}
	return append(shapes, wasmtest.LoopModule{Name: "break", Funcs: fn(
		0x02, 0x40, 0x03, 0x40, // block, loop
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, // n--
		0x41, 0x05, 0x46, 0x0d, 0x01, // n == 5: br_if to the block
		0x20, 0x00, 0x0d, 0x00, // n != 0: br_if to the loop
		0x0b, 0x0b, 0x20, 0x00, // end, end, n
	)}, wasmtest.LoopModule{Name: "return", Funcs: fn(
		0x03, 0x40, // loop
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, // n--
		0x41, 0x03, 0x46, 0x04, 0x40, 0x41, 0xe3, 0x00, 0x0f, 0x0b, // n == 3: return 99
		0x20, 0x00, 0x0d, 0x00, // n != 0: br_if to the loop
		0x0b, 0x20, 0x00, // end, n
	)})
}

// TestUnrolledLoops: small loops unrolled (instrument_emit.go) compute what they did, for
// any number of passes, and use the same fuel as without unrolling: the yields a run takes
// with a small allowance differ by at most the unrolled passes' slack. The unrolled module
// must be larger than the one instrumented without unrolling, or nothing was unrolled.
func TestUnrolledLoops(t *testing.T) {
	// An unrolled loop's header charges up to maxUnrollCopies passes at once, and the
	// refill forgives what a check took below zero: the allowance is large against a group
	// of passes (a few units each), so that slack stays within the bounds below.
	const allowance = 500
	ctx := context.Background()
	for _, tt := range unrollShapes() {
		t.Run(tt.Name, func(t *testing.T) {
			mod := wasmtest.Module(tt.Funcs...)
			flat, err := InstrumentWith(mod, Options{Segment: SegmentBytes, Unroll: 1})
			if err != nil {
				t.Fatal(err)
			}
			unrolled, err := InstrumentWith(mod, Options{Segment: SegmentBytes, Unroll: UnrollCopies})
			if err != nil {
				t.Fatal(err)
			}
			if len(unrolled) <= len(flat) {
				t.Fatalf("nothing unrolled: %d bytes, %d without unrolling", len(unrolled), len(flat))
			}
			var yields int
			rt := wazero.NewRuntime(ctx)
			t.Cleanup(func() { _ = rt.Close(ctx) })
			_, err = rt.NewHostModuleBuilder(YieldModule).NewFunctionBuilder().
				WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, s []uint64) {
					yields++
					s[0] = allowance
				}), nil, []api.ValueType{api.ValueTypeI32}).Export(YieldImport).Instantiate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var runs [3]api.Function
			for i, wasm := range [][]byte{mod, flat, unrolled} {
				m, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(fmt.Sprint(i)))
				if err != nil {
					t.Fatal(err)
				}
				runs[i] = m.ExportedFunction("run")
			}
			for _, n := range []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 1000, 4099, 40009} {
				var got [3]uint64
				var used [3]int
				for i, run := range runs {
					yields = 0
					res, err := run.Call(ctx, n, 0)
					if err != nil {
						t.Fatalf("n=%d, module %d: %v", n, i, err)
					}
					got[i], used[i] = res[0], yields
				}
				if got[1] != got[0] || got[2] != got[0] {
					t.Errorf("n=%d: run() = %d, instrumented %d, unrolled %d", n, got[0], got[1], got[2])
				}
				// A run of the loop pays for at most a group's passes it did not run (one
				// yield more at most), and a check that yields forgives at most a group's
				// charge: a yield in eight at this allowance, and fewer.
				if d := used[2] - used[1]; d > 1 || -d > used[1]/8+1 {
					t.Errorf("n=%d: %d yields unrolled, %d without unrolling", n, used[2], used[1])
				}
			}
		})
	}
}
