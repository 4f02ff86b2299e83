package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/wqhost/wqhost/internal/wasmtest"
	wqruntime "github.com/wqhost/wqhost/runtime"
)

// growPlugin is a plugin of one page whose function grow_to_cap grows its memory to
// MemoryPages and returns 0 when that worked, and past_cap grows it one page past
// MemoryPages and returns 0 when that was refused (memory.grow answered -1).
func growPlugin(t *testing.T) string {
	t.Helper()
	grow := func(pages int32, wantRefused bool) []byte {
		b := append(wasmtest.I32Const(pages), 0x40, 0x00) // memory.grow
		b = append(b, wasmtest.I32Const(-1)...)
		b = append(b, 0x46) // i32.eq: 1 when refused
		if wantRefused {
			b = append(b, 0x45) // i32.eqz: 0 when refused
		}
		return b
	}
	mod := wasmtest.Spec{MemPages: 1, Funcs: []wasmtest.Func{
		{Export: "grow_to_cap", Results: []byte{wasmtest.I32}, Body: grow(int32(MemoryPages)-1, false)},
		{Export: "past_cap", Results: []byte{wasmtest.I32}, Body: grow(int32(MemoryPages), true)},
	}}.Bytes()
	path := filepath.Join(t.TempDir(), "grow.wasm")
	if err := os.WriteFile(path, mod, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExtismHasTheTenantMemoryCap: the Extism engines run under the linear memory cap
// wqhost's tenants get (128 MiB), not wazero's 4 GiB default, so that the two sides of a
// comparison have the same room.
func TestExtismHasTheTenantMemoryCap(t *testing.T) {
	ctx := context.Background()
	if MemoryPages != wqruntime.DefaultMemoryPages {
		t.Fatalf("MemoryPages = %d, want the tenant default %d", MemoryPages, wqruntime.DefaultMemoryPages)
	}
	path := growPlugin(t)
	for _, fn := range []string{"grow_to_cap", "past_cap"} {
		c, err := openExtismFile(ctx, path, fn, 1, 0, cacheDir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(ctx, nil); err != nil {
			t.Errorf("%s: %v (want the memory capped at exactly %d pages)", fn, err, MemoryPages)
		}
		_ = c.Close(ctx)
	}
}
