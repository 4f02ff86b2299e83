package runtime

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// A guest call's native stack is the host's memory too. wazero's optimizing compiler runs a
// call on a stack of its own, a Go slice doubled whenever the guest's calls go deeper, up
// to about 100 MB; a stack overflow trap ends the call only there. One endless recursion
// took a host 130 MB, and eight at once, in two bindings of a tenant, 1.4 GB: a 1 GiB
// container killed by the recursion its tenant's legal module did. And the stack stays as
// grown with the function value, for the instance's next calls.
//
// wazero exposes neither the stack nor a limit for it. So when a guest yields (yield.go),
// the host reads the length of the running function's stack and reserves twice that from the tenant's memory budget
// (ConsumerStacks), since the next growth doubles it: the budget refuses a recursion
// before it takes the host's memory, not after, and the call fails with the budget's
// reason. A recursion yields at least every fuel allowance, which charges every function
// entry and the code run (package fuel): a frame grows only with code, since each value it
// keeps across a call is an instruction that put it there (locals never set take no room),
// so a frame costs at most a few times its code's charge, and a recursion is looked at
// every few MiB of stack at most (TestGuestStackReserved: frames of 2,000 live locals). What
// an instance's stacks reserved goes back when the instance closes.
//
// The length is read from wazero's function value by reflection, which wazero does not
// promise: stackField finds the field at a pool's first instance and says -1 where it is not there (a
// wazero whose function value has no []byte field named stack), and the host then checks
// nothing. TestGuestStackReserved holds it to the wazero this module builds with.
//
// A pooled instance's _initialize (a Go or TinyGo reactor's start, a Rust one's
// constructors) and an Extism plugin's constructors run as calls of the host's
// (Pool.newInstance, runStart), so their stacks are seen too. Not covered: a module's start
// section (wazero runs it inside InstantiateModule; no compiler this project knows emits
// one), modules without the fuel counter (no yields) and wasi-stdio commands, whose one call
// is their _start.

// stackUnknown is Pool.stackIdx before the pool's first instance.
const stackUnknown = -2

// stackField is the index of the []byte field named stack in the struct fn points to, or
// -1.
func stackField(fn api.Function) int {
	v := reflect.ValueOf(fn)
	if !v.IsValid() || v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return -1
	}
	f, ok := v.Elem().Type().FieldByName("stack")
	if !ok || len(f.Index) != 1 || f.Type != reflect.TypeFor[[]byte]() {
		return -1
	}
	return f.Index[0]
}

// stackLen is the length of fn's stack, field i of what it points to (stackField).
func stackLen(fn api.Function, i int) int64 {
	return int64(reflect.ValueOf(fn).Elem().Field(i).Len())
}

// reserveStack reserves what the running call's stack may take by its next growth, when
// that is more than the instance's stacks reserved already; it returns the budget's
// refusal.
func (st *callState) reserveStack() error {
	p := st.pool
	idx := int(p.stackIdx.Load())
	if st.running == nil || idx < 0 {
		return nil
	}
	want := 2 * stackLen(st.running, idx)
	if want <= st.stackHeld {
		return nil
	}
	if err := p.t.mem.reserve(ConsumerStacks, want-st.stackHeld, p.memWhat); err != nil {
		return err
	}
	st.stackHeld = want
	return nil
}

// runStart calls mod's export name, if it has one, as a start function, the way wazero's
// WithStartFunctions does (the module closed if it fails; a WASI exit with code 0 is not an
// error), but as a call whose stack a yield reads. It returns mod, or the error.
func (st *callState) runStart(ctx context.Context, mod api.Module, name string) (api.Module, error) {
	fn := mod.ExportedFunction(name)
	if fn == nil {
		return mod, nil
	}
	if p := st.pool; p.stackIdx.Load() == stackUnknown {
		p.stackIdx.Store(int32(stackField(fn)))
	}
	st.running = fn
	_, err := fn.Call(ctx)
	st.running = nil
	if err == nil {
		return mod, nil
	}
	_ = mod.Close(ctx)
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() == 0 {
			return mod, nil // as wazero does: closed, and no error
		}
		return nil, err
	}
	return nil, fmt.Errorf("module function[%s] failed: %w", name, err)
}

// releaseStack gives back what the instance's stacks, and its tables and globals, reserved, when it
// closes.
func (st *callState) releaseStack() {
	st.pool.t.mem.release(ConsumerStacks, st.stackHeld)
	st.pool.t.mem.release(ConsumerInstances, st.tableHeld)
	st.stackHeld, st.tableHeld = 0, 0
}
