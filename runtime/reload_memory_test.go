package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// heldModules is the number of module versions the engine still knows of.
func (e *Engine) heldModules() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.modules)
}

// heldCompiled is the number of compiled modules the tenant holds, in both its runtimes.
func (t *Tenant) heldCompiled() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.compiled[0]) + len(t.compiled[1])
}

// TestHotReloadsFreeOldVersions: a binding reloaded 100 times, each version a different
// module of 1 MiB (a custom section pads it), serving a message and then replaced. The engine
// and the tenant keep no more than the versions in use, and the heap after 100 reloads is
// what it was after 10: each version's bytes, instrumented copy and compiled code go with
// its last pool.
func TestHotReloadsFreeOldVersions(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(ctx, EngineConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(ctx) })
	ten, err := e.Tenant("t", TenantLimits{MemoryPages: 16})
	if err != nil {
		t.Fatal(err)
	}
	base := wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: wasmtest.I32Const(0)},
	)
	version := func(i int) []byte {
		// A custom section "pad" of 1 MiB whose first bytes are the version number.
		payload := append([]byte{3, 'p', 'a', 'd'}, make([]byte, 1<<20)...)
		binary.LittleEndian.PutUint32(payload[4:], uint32(i))
		sec := binary.AppendUvarint([]byte{0}, uint64(len(payload)))
		return append(append(append([]byte(nil), base...), sec...), payload...)
	}
	heap := func() uint64 {
		var ms goruntime.MemStats
		for range 3 {
			goruntime.GC() // cleanups run after a cycle; the next cycles free what they dropped
			time.Sleep(10 * time.Millisecond)
		}
		goruntime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	var prev *Pool
	var at10 uint64
	for i := range 100 {
		m, err := e.Compile(ctx, fmt.Sprintf("v%d.wasm", i), version(i), ABIWqhostV1)
		if err != nil {
			t.Fatal(err)
		}
		p, err := ten.NewPool(ctx, m, PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 1, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil {
			if err := prev.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		prev = p
		if _, err := p.Call(ctx, &Input{ID: fmt.Sprint("m", i)}); err != nil {
			t.Fatal(err)
		}
		if i == 9 {
			at10 = heap()
		}
	}
	at100 := heap()
	deadline := time.Now().Add(10 * time.Second)
	for e.heldModules() > 2 && time.Now().Before(deadline) {
		goruntime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := e.heldModules(); n > 2 {
		t.Errorf("engine holds %d module versions after 100 reloads, want at most 2", n)
	}
	if n := ten.heldCompiled(); n > 2 {
		t.Errorf("tenant holds %d compiled modules after 100 reloads, want at most 2", n)
	}
	t.Logf("heap in use after 10 reloads %d MiB, after 100 %d MiB", at10>>20, at100>>20)
	// A leak would keep 2 MiB per version (bytes and instrumented copy): 180 MiB more.
	if at100 > at10+32<<20 {
		t.Errorf("heap grew from %d MiB after 10 reloads to %d MiB after 100", at10>>20, at100>>20)
	}
}
