package runtime

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// growTo grows the one-page memory of a wasmtest module to pages pages.
func growTo(pages int32) []byte {
	return append(wasmtest.I32Const(pages-1), 0x40, 0x00, 0x1a) // memory.grow, drop
}

// memoryCopy is memory.copy of n bytes from src to dst.
func memoryCopy(dst, src, n int32) []byte {
	return append(wasmtest.I32s(dst, src, n), 0xfc, 0x0a, 0x00, 0x00)
}

// TestBulkMemoryChargedByLength: memory.fill and memory.copy are charged by their length,
// one unit per 16 bytes (package fuel, "Bulk memory operations"), and do what they did.
// With a constant charge per operation, one fill of 16 MiB cost the same fuel as 32 KiB of
// code.
func TestBulkMemoryChargedByLength(t *testing.T) {
	const mib = 1 << 20
	e := testEngine(t)
	ten, err := e.Tenant("t-bulk", TenantLimits{MemoryPages: 512})
	if err != nil {
		t.Fatal(err)
	}
	// Fill 16 MiB with 7, copy its upper half onto 0: the byte at 16 MiB - 1 is 7, the
	// status 0; else 1 (retry).
	body := concat(growTo(256), wasmtest.MemoryFill(0, 7, 16*mib), memoryCopy(0, 8*mib, 8*mib),
		wasmtest.I32Const(16*mib-1), []byte{0x2d, 0x00, 0x00}, wasmtest.I32Const(7), []byte{0x47}) // i32.load8_u, i32.ne
	m, err := e.Compile(context.Background(), "bulk.wasm", handleModule(nil, body), ABIWqhostV1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	var out Result
	if err := p.CallInto(context.Background(), &Input{ID: "m"}, &out); err != nil || out.Verdict != VerdictOK {
		t.Fatalf("status %v, err %v: want ok (the fill and the copy as before)", out.Verdict, err)
	}
	if want := uint64(24*mib) >> fuel.BulkShift; uint64(out.Usage.Fuel) < want {
		t.Fatalf("fuel %d for a fill of 16 MiB and a copy of 8 MiB: want at least %d (one unit per 16 bytes)", out.Usage.Fuel, want)
	}
}

// TestBulkMemoryLoopsStopAtTheTimeLimit: a guest filling or copying 256 MiB a pass (16 MiB
// under the race detector) in an endless loop ends at its time limit. With a constant charge per operation it yielded every
// 32 passes: filling 1 GiB a pass, `wqhost call --timeout 2s --memory 1GiB` returned after
// 5.7 s; 128 MiB, after 2.34 s.
func TestBulkMemoryLoopsStopAtTheTimeLimit(t *testing.T) {
	const limit = 300 * time.Millisecond
	size := int32(256 << 20)
	if raceDetector {
		// The race detector follows every byte wazero's memmove and memclr touch: a pass of
		// 256 MiB takes over a second there, beyond any margin. At 16 MiB the loop only shows
		// the limit holds (the old constant charge passed too); TestBulkMemoryChargedByLength
		// holds the charge either way.
		size = 16 << 20
	}
	pages := uint32(size/PageBytes + 1)
	e := testEngine(t)
	ten, err := e.Tenant("t-bulk-loop", TenantLimits{MemoryPages: pages})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		op   []byte
	}{
		{"memory.fill", wasmtest.MemoryFill(0, 7, size)},
		{"memory.copy", memoryCopy(0, size/2, size/2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := e.Compile(context.Background(), "bulkloop.wasm", handleModule(nil, growTo(int32(pages)), wasmtest.Forever(tc.op), wasmtest.I32Const(0)), ABIWqhostV1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ten.NewPool(context.Background(), m, PoolConfig{Binding: "b", Timeout: limit})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close(context.Background()) })
			// A bulk operation runs whole between two checks: the call may overrun the
			// limit by one pass. What a pass takes depends on the machine and its load, so
			// the bound allows two passes as long as the same bytes take the host's own
			// memclr or memmove, measured beside each call.
			withinBound(t, limit+2*limitMargin, func() (time.Duration, error) {
				pass := hostBulkPass(int(size), tc.name == "memory.copy")
				took, err := timedCall(context.Background(), p, &Input{ID: "m"})
				took -= 2 * pass
				if !errors.Is(err, ErrTimeout) {
					return 0, fmt.Errorf("err = %v, want the time limit", err)
				}
				return took, nil
			})
		})
	}
}

// hostBulkPass is how long the host's own memclr (or memmove of half) of size bytes takes
// now: the time a guest's memory.fill or memory.copy of that size runs without a check.
func hostBulkPass(size int, copying bool) time.Duration {
	buf := make([]byte, size)
	clear(buf) // fault the pages in, as the guest's memory already is
	start := time.Now()
	if copying {
		copy(buf[:size/2], buf[size/2:])
	} else {
		clear(buf)
	}
	return time.Since(start)
}
