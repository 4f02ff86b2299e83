package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestMemoryLimitReasonOnlyForARefusedGrow: a call is reported as over the memory limit only
// when a memory.grow was refused at the limit during it. A guest that grows its memory to
// the limit and then executes unreachable trapped (it used to be reported as "exceeded its
// memory limit" for being near its limit); one whose memory.grow the limit refused, by one
// page or far past it, and that then traps, ran out of memory.
func TestMemoryLimitReasonOnlyForARefusedGrow(t *testing.T) {
	// The module's memory starts at 1 page and declares no maximum.
	const limit = 16 // pages
	// memory.grow(pages); drop
	grow := func(pages int32) []byte { return append(wasmtest.I32Const(pages), 0x40, 0x00, 0x1a) }
	unreachable := []byte{0x00}
	e := testEngine(t)
	ctx := context.Background()
	ten, err := e.Tenant("t-growth", TenantLimits{MemoryPages: limit})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		body     []byte
		want     error
		contains string
	}{
		{"grown to the limit, then unreachable", concat(grow(limit-1), unreachable), ErrTrap, "unreachable"},
		{"grow one page past the limit refused, then unreachable", concat(grow(limit-1), grow(1), unreachable), ErrMemoryLimit, ""},
		{"grow far past the limit refused, then unreachable", concat(grow(60000), unreachable), ErrMemoryLimit, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := e.Compile(ctx, "grow.wasm", handleModule(nil, tc.body), ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = p.Close(ctx) }()
			for i := range 2 { // a fresh instance, then one replacing it
				_, err = p.Call(ctx, &Input{ID: fmt.Sprint("m", i)})
				if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.contains) {
					t.Fatalf("call %d: err = %v; want %v containing %q", i, err, tc.want, tc.contains)
				}
				if tc.want == ErrTrap && errors.Is(err, ErrMemoryLimit) {
					t.Fatalf("call %d: err = %v; a trap, not the memory limit", i, err)
				}
			}
		})
	}
}
