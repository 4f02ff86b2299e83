package runtime

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"

	"github.com/wqhost/wqhost/runtime/internal/wasmbin"
)

// tableModule is a wqhost/v1 module with one funcref table of min elements (and max, if
// max >= 0), a function $f declared for ref.func, and wqhost_handle running body.
// Functions: 0 $f, 1 wqhost_abi_v1, 2 wqhost_handle.
func tableModule(tableMin uint32, tableMax int64, body []byte) []byte {
	sec := func(id byte, payload []byte) []byte {
		return append(wasmbin.AppendU32([]byte{id}, uint32(len(payload))), payload...)
	}
	name := func(s string) []byte { return append(wasmbin.AppendU32(nil, uint32(len(s))), s...) }
	limits := wasmbin.AppendU32([]byte{0x00}, tableMin)
	if tableMax >= 0 {
		limits = wasmbin.AppendU32(wasmbin.AppendU32([]byte{0x01}, tableMin), uint32(tableMax))
	}
	fn := func(code []byte) []byte {
		return append(wasmbin.AppendU32(nil, uint32(len(code)+1)), append([]byte{0x00}, code...)...)
	}
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, sec(1, []byte{2, 0x60, 0, 0, 0x60, 0, 1, 0x7f})...)
	m = append(m, sec(3, []byte{3, 0, 0, 1})...)
	m = append(m, sec(4, append([]byte{1, 0x70}, limits...))...)
	m = append(m, sec(5, []byte{1, 0, 1})...)
	exports := []byte{3}
	exports = append(append(exports, name("memory")...), 0x02, 0)
	exports = append(append(exports, name("wqhost_abi_v1")...), 0x00, 1)
	exports = append(append(exports, name("wqhost_handle")...), 0x00, 2)
	m = append(m, sec(7, exports)...)
	m = append(m, sec(9, []byte{1, 3, 0x00, 1, 0})...) // declarative: ref.func $f
	code := []byte{3}
	code = append(code, fn([]byte{0x0b})...)
	code = append(code, fn([]byte{0x0b})...)
	code = append(code, fn(append(body, 0x0b))...)
	return append(m, sec(10, code)...)
}

// tableGrowLoop grows table 0 by n elements of ref.func $f for ever.
func tableGrowLoop(n int32) []byte {
	return concat([]byte{0x03, 0x40, 0xd2, 0x00}, wasmtest.I32Const(n),
		[]byte{0xfc, 15, 0x00, 0x1a, 0x0c, 0x00, 0x0b}, wasmtest.I32Const(0))
}

// tableFillLoop fills table 0's first n elements with ref.func $f for ever.
func tableFillLoop(n int32) []byte {
	return concat([]byte{0x03, 0x40}, wasmtest.I32Const(0), []byte{0xd2, 0x00}, wasmtest.I32Const(n),
		[]byte{0xfc, 17, 0x00, 0x0c, 0x00, 0x0b}, wasmtest.I32Const(0))
}

// TestTableBombsRefused: tables live on the host's heap, outside the tenant's memory limit,
// 8 bytes an element, and table.grow and table.fill run in Go between two fuel checks. A
// guest growing a table without a maximum in a loop took `wqhost call --timeout 2s` to 18 GB
// of resident memory and past 60 s; one filling a declared table of 10⁸ elements to 808 MB
// and 3.8 s. Such modules are refused at load by max_table_elements, naming the cap, while a
// table within it still loads, grows up to its maximum and ends at the time limit.
func TestTableBombsRefused(t *testing.T) {
	ctx := context.Background()
	e := testEngine(t)
	for _, tc := range []struct {
		name     string
		wasm     []byte
		got      uint64
		refused  bool
		wantText string
	}{
		{"grow without a maximum", tableModule(0, -1, tableGrowLoop(1<<24)), math.MaxUint32, true, "declare the table's maximum"},
		{"declared 2^27 elements", tableModule(1<<27, -1, wasmtest.I32Const(0)), 1 << 27, true, "the elements of the module's tables together"},
		{"fill of 10^8 elements", tableModule(100_000_000, 100_000_000, tableFillLoop(100_000_000)), 100_000_000, true, "tables together"},
		{"grow up to a maximum above the cap", tableModule(0, 1<<21, tableGrowLoop(1<<20)), 1 << 21, true, "at their maxima, with table.grow"},
		{"grow up to a maximum within the cap", tableModule(0, 1<<20, tableGrowLoop(1<<16)), 0, false, ""},
		{"no maximum, never grown", tableModule(1000, -1, wasmtest.I32Const(0)), 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := e.Compile(ctx, "tables.wasm", tc.wasm, ABIWqhostV1)
			if tc.refused {
				var ce *CapError
				if !errors.As(err, &ce) || ce.Cap != "max_table_elements" || ce.Got != tc.got || ce.Limit != DefaultMaxTableElements ||
					!strings.HasPrefix(err.Error(), "runtime: tables.wasm: compile limit: ") || !strings.Contains(err.Error(), tc.wantText) {
					t.Fatalf("err = %v; want a max_table_elements *CapError of %d naming the module, saying %q", err, tc.got, tc.wantText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ten, err := e.Tenant("t-"+strings.ReplaceAll(tc.name, " ", "-"), TenantLimits{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Close(ctx) }()
			_, err = p.Call(ctx, &Input{ID: "m1"})
			if loops := tc.got == 0 && strings.HasPrefix(tc.name, "grow"); loops && !errors.Is(err, ErrTimeout) {
				t.Errorf("err = %v; want the time limit (the table stops growing at its maximum)", err)
			} else if !loops && err != nil {
				t.Errorf("err = %v; want ok", err)
			}
		})
	}
}
