package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// recursion is a wqhost/v1 module whose handler calls itself without end, each frame
// holding locals i64 locals across the call (set before it, summed into memory after, so
// the compiler keeps them in the frame: a frame of locals × 8 bytes and more).
func recursion(locals int) []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	section := func(mod []byte, id byte, body []byte) []byte {
		return append(uleb(append(mod, id), len(body)), body...)
	}
	body := []byte{0x00}
	if locals > 0 {
		body = append(uleb([]byte{0x01}, locals), wasmtest.I64)
	}
	for j := range locals {
		body = uleb(append(wasmtest.AppendSLEB(append(body, 0x42), int64(j+1)), 0x21), j) // i64.const; local.set
	}
	body = append(body, 0x10, 0x00) // call 0 (itself)
	if locals > 0 {
		body = append(body, wasmtest.I32Const(0)...)
		for j := range locals {
			body = uleb(append(body, 0x20), j) // local.get
			if j > 0 {
				body = append(body, 0x7c) // i64.add
			}
		}
		body = append(body, 0x37, 0x03, 0x00) // i64.store
	}
	body = append(body, 0x0b)
	code := append(uleb([]byte{0x02}, len(body)), body...)
	code = append(code, 0x02, 0x00, 0x0b) // the marker
	exports := append([]byte{0x03, 13}, "wqhost_handle"...)
	exports = append(append(exports, 0x00, 0x00, 13), "wqhost_abi_v1"...)
	exports = append(append(exports, 0x00, 0x01, 6), "memory"...)
	exports = append(exports, 0x02, 0x00)
	mod := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	mod = section(mod, 1, []byte{0x02, 0x60, 0x00, 0x01, wasmtest.I32, 0x60, 0x00, 0x00})
	mod = section(mod, 3, []byte{0x02, 0x00, 0x01})
	mod = section(mod, 5, []byte{0x01, 0x00, 0x01})
	mod = section(mod, 7, exports)
	return section(mod, 10, code)
}

// TestGuestStackReserved: a guest call's native stack reserves from its tenant's memory
// budget as it grows (twice its length, ahead of wazero's next doubling), so an endless
// recursion in a tenant with a small budget fails on the budget's word long before
// wazero's 100 MB stack ceiling, with thin frames and with frames of 2,000 live locals (the
// code that fills them is charged, so the call yields often enough to be looked at);
// nothing stays reserved once the instance is gone. Unbudgeted, it is the stack overflow it
// was.
func TestGuestStackReserved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		locals int
		budget int64
		want   error
	}{
		{"thin frames, 24 MiB budget", 0, 24 << 20, ErrMemoryBudget},
		{"2,000 locals a frame, 24 MiB budget", 2000, 24 << 20, ErrMemoryBudget},
		{"unbudgeted", 0, 0, ErrStackOverflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := budgetEngine(t, 0)
			ten := budgetTenant(t, e, "deep", tc.budget)
			m, err := e.Compile(context.Background(), "rec.wasm", recursion(tc.locals), ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", MaxInstances: 1, MinInstances: 1})
			if err != nil {
				t.Fatal(err)
			}
			if idx := p.stackIdx.Load(); idx < 0 {
				t.Fatalf("stackField found no stack in wazero's function value (%d): the host reads no guest stack", idx)
			}
			_, err = p.Call(context.Background(), &Input{ID: "m"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("call = %v; want %v", err, tc.want)
			}
			u := ten.MemoryBudget()
			var be *BudgetError
			if tc.budget > 0 && (!errors.As(err, &be) || be.Consumer != ConsumerStacks || u.Peak > tc.budget) {
				t.Errorf("refused by %+v, peak %d; want the call stacks refused within the %d-byte budget", be, u.Peak, tc.budget)
			}
			if tc.budget > 0 && u.ByConsumer["stacks"] != 0 {
				t.Errorf("the trapped instance's stacks hold %d bytes; want 0 once it is gone", u.ByConsumer["stacks"])
			}
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := ten.MemoryBudget().ByConsumer["stacks"]; got != 0 {
				t.Errorf("after close, stacks hold %d bytes; want 0", got)
			}
		})
	}
}
