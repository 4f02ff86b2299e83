package runtime

import (
	"bytes"
	"context"
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"

	"github.com/tetratelabs/wazero"
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

// measureLoad loads wasm from cache into a fresh runtime, as a tenant runtime of the host
// would, and returns what that cost in resident memory; 0 when the platform cannot say.
func measureLoad(ctx context.Context, cache wazero.CompilationCache, wasm []byte) int64 {
	debug.FreeOSMemory()
	before := residentBytes()
	if before <= 0 {
		return 0
	}
	peakKnown := resetPeakRSS()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	defer rt.Close(ctx)
	cm, err := compileModule(ctx, rt, wasm)
	if err != nil {
		return 0
	}
	var peak int64
	if peakKnown {
		peak = peakRSS() - before
	}
	debug.FreeOSMemory()
	held := residentBytes() - before
	goruntime.KeepAlive(cm)
	return max(peak, held, 0)
}

// residentBytes is this process's resident memory, from /proc/self/statm; 0 if unknown.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// resetPeakRSS resets the kernel's high-water mark of this process's resident memory
// (VmHWM) to what it is now; false where that is not allowed.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is VmHWM from /proc/self/status in bytes; 0 if unknown.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := bytes.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(string(f[0]), 10, 64)
				if err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
