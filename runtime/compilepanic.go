package runtime

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
)

// ErrCompilerPanic marks a module wazero's decoder, validator or compiler panicked on. It is
// a wazero bug, not the host's: the module is refused with this error instead of the panic
// ending the process. Found: wazero 1.12 indexes the type section with a callee's type index
// before it has checked that index (wasmtest.BadCallType, 30 bytes).
var ErrCompilerPanic = errors.New("wazero panicked compiling the module (a wazero bug; the module is refused)")

// compileModule is rt.CompileModule with a panic turned into ErrCompilerPanic. What wazero
// had built of the module before the panic is garbage; its validator runs before it touches
// the runtime's store, so the runtime stays usable for other modules.
func compileModule(ctx context.Context, rt wazero.Runtime, wasm []byte) (cm wazero.CompiledModule, err error) {
	defer func() {
		if p := recover(); p != nil {
			cm, err = nil, fmt.Errorf("%w: %v", ErrCompilerPanic, p)
		}
	}()
	return rt.CompileModule(ctx, wasm)
}
