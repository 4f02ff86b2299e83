package fuel

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/wqhost/wqhost/internal/wasmtest"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// leafLoop is a guest whose handler loops forever calling a small leaf function (six
// dependent square roots, weighing 26 bytes plus 6×slowBytes), counting its rounds at offset
// 8 of its memory. The leaf is exported too, so it keeps an original with its own charge.
func leafLoop() []byte {
	marker := wasmtest.Func{Export: "wqhost_abi_v1"}
	count := []byte{0x41, 8, 0x41, 8, 0x28, 2, 0, 0x41, 1, 0x6a, 0x36, 2, 0} // mem[8]++
	return wasmtest.Module(marker,
		wasmtest.Func{Export: "leaf", Body: wasmtest.SqrtChain(6)},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32},
			Body: slices.Concat([]byte{0x03, 0x40}, count, wasmtest.Call(1), []byte{0x0c, 0x00, 0x0b, 0x00})})
}

// TestLeafCallsChargedByTheCaller: a loop's direct call of a small leaf goes to a copy of
// the leaf that touches no fuel (so the loop keeps its fuel in a local: no load and store of
// the fuel global per pass, what made a loop calling a small function cost 2× on a 2 GHz
// EPYC), and the caller's checks charge the leaf's code: between two yields the guest runs
// no more rounds than an allowance pays for, leaf included.
func TestLeafCallsChargedByTheCaller(t *testing.T) {
	wasm := leafLoop()
	yc, err := Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	x, params := fuelIndexOf(t, wasm)
	if len(x.leaves.copies) != 1 || x.leaves.copies[0] != 1 {
		t.Fatalf("copied leaves %v, want function 1", x.leaves.copies)
	}
	// The handler's call goes to the copy, whose code is the leaf's, checks and fuel
	// accesses none (stripChecks holds the copy to its original; it reads code instrumented
	// without unrolling).
	flat, err := InstrumentWith(wasm, Options{Segment: SegmentBytes, Fuel: Refill, Unroll: 1})
	if err != nil {
		t.Fatal(err)
	}
	stripChecks(t, sectionOf(t, flat, wasmbin.SecCode), x, params)
	code := sectionOf(t, yc, wasmbin.SecCode)
	calls := 0
	r := &wasmbin.Reader{Buf: code}
	r.U32()
	for f := range uint32(3) {
		body := r.Bytes(int(r.U32()))
		if f != 2 {
			continue
		}
		for i := 0; i+1 < len(body); i++ {
			if body[i] == 0x10 && uint32(body[i+1]) == x.leaves.copyOf[1] {
				calls++
			}
		}
	}
	if calls == 0 {
		t.Fatalf("the handler does not call the leaf's copy (function %d)", x.leaves.copyOf[1])
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
	// A round is at least the leaf's weight; uncharged, the leaf would let about 16 times
	// as many rounds run (the loop's own code is 17 bytes).
	const leafWeight = 26 + 6*slowBytes
	if most == 0 || int(most)*leafWeight > Refill*ChargeBytes {
		t.Errorf("%d rounds between two yields: the leaf's %d bytes a round make %d, more than an allowance (%d)",
			most, leafWeight, int(most)*leafWeight, Refill*ChargeBytes)
	}
}
