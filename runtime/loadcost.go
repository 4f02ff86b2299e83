package runtime

import (
	"context"
	goruntime "runtime"
	"runtime/debug"

	"github.com/tetratelabs/wazero"
	"github.com/wqhost/wqhost/internal/memlimit"
)

// What a module costs the host is known before the host pays it. A compile child leaves
// machine code in the cache, but every tenant runtime that serves the module still loads it
// in the host process: wazero decodes and validates the bytes again, reads the machine code
// into an executable mapping and compiles a trampoline per function type. That is work the
// structural caps bound only loosely, so the child, having compiled, does one such load
// itself in a fresh runtime and measures it: the peak of its resident memory above where it
// stood (the kernel's high-water mark, reset first through /proc/self/clear_refs), or what
// the loaded module kept after a collection, whichever is more. The host reserves that from
// the tenant's memory budget (ConsumerModules) before it loads the module into a runtime,
// and refuses the load when it does not fit.

// measureLoad loads wasm from the cache directory dir into a fresh runtime, as a tenant
// runtime of the host would (terminate: with close-on-context-done, as the host loads a
// module without a fuel counter), and returns what that cost in resident memory; 0 when the
// platform cannot say.
//
// Through a cache of its own: a wazero CompilationCache shares one engine between all its
// runtimes, and the child's engine still held the module it had just compiled, so a load
// through it found the machine code in memory and measured only the decoding (6.8 MiB of
// testdata/guest's 9.2 MiB of machine code, TestBudgetModules). The host's
// tenant runtime reads the machine code from the file and maps it, which is what counts.
func measureLoad(ctx context.Context, dir string, wasm []byte, terminate bool) int64 {
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return 0
	}
	defer cache.Close(ctx)
	// The runtime, and its engine, before the measure: the host's tenant runtime exists
	// before it loads a module, and its cost is not the module's.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCompilationCache(cache).WithCloseOnContextDone(terminate))
	defer rt.Close(ctx)
	debug.FreeOSMemory()
	before := memlimit.Resident()
	if before <= 0 {
		return 0
	}
	peakKnown := memlimit.ResetPeak()
	cm, err := compileModule(ctx, rt, wasm)
	if err != nil {
		return 0
	}
	var peak int64
	if peakKnown {
		peak = memlimit.Peak() - before
	}
	debug.FreeOSMemory()
	held := memlimit.Resident() - before
	goruntime.KeepAlive(cm)
	return max(peak, held, 0)
}
