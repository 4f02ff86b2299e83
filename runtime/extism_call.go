package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// ErrPluginFailed is an Extism plugin's own failure: its function returned a non-zero code or
// set an error (error_set). The message is retried, then dead-lettered, with that reason.
var ErrPluginFailed = errors.New("extism plugin failed")

// extismFunction checks that m exports the function an Extism binding calls, with a
// signature Extism allows (no parameters, an i32 result or none), and returns its name.
func extismFunction(m *Module, cfg PoolConfig, exports map[string]api.FunctionDefinition) (string, error) {
	name := cfg.Function
	if name == "" {
		name = DefaultExtismFunction
	}
	def, ok := exports[name]
	if !ok {
		var names []string
		for n := range exports {
			if !extismRuntimeExport(n) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		return "", fmt.Errorf("runtime: binding %s: module %s does not export function %q (set the binding's function: to the plugin function to call; it exports %s)",
			cfg.Binding, m.name, name, strings.Join(names, ", "))
	}
	if len(def.ParamTypes()) != 0 || len(def.ResultTypes()) > 1 || len(def.ResultTypes()) == 1 && def.ResultTypes()[0] != api.ValueTypeI32 {
		return "", fmt.Errorf("runtime: binding %s: module %s: export %s has signature %s, want ()->(i32) or ()->()",
			cfg.Binding, m.name, name, sigString(def.ParamTypes(), def.ResultTypes()))
	}
	return name, nil
}

// extismCallable lists the exports an Extism host can call as a plugin function, sorted.
func extismCallable(exports map[string]api.FunctionDefinition) []string {
	var names []string
	for n, def := range exports {
		r := def.ResultTypes()
		if len(def.ParamTypes()) == 0 && (len(r) == 0 || len(r) == 1 && r[0] == api.ValueTypeI32) && !extismRuntimeExport(n) && n != "_initialize" {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// extismRuntimeExport reports the exports a language runtime adds, left out of the list an
// unknown function's error offers.
func extismRuntimeExport(n string) bool {
	switch n {
	case "_initialize", "malloc", "free", "calloc", "realloc", "hs_init", "__wasm_call_ctors":
		return true
	}
	return strings.HasPrefix(n, "asyncify_")
}

// initExtism gives a new instance its kernel and initialises the plugin's language runtime
// the way Extism's hosts do: a WASI reactor's _initialize already ran as the start function;
// a module without one has its constructors (__wasm_call_ctors) run, and a Haskell module
// hs_init. A plugin whose function is _start (a command) initialises itself.
//
// The kernel memory is mapped like the instance's guest memory and reserves from the same
// budget; im unmaps it with them (instanceMemory.settle).
func (p *Pool) initExtism(ctx context.Context, st *callState, mod api.Module, im *instanceMemory) error {
	st.ext = newExtismState(im.g, p.memLimit, im.budget, fmt.Sprintf("binding %s (%s): kernel memory", p.cfg.Binding, p.m.name))
	im.kernels = append(im.kernels, st.ext.k)
	if p.ext == "_start" {
		return nil
	}
	if mod.ExportedFunction("_initialize") == nil {
		if f := mod.ExportedFunction("__wasm_call_ctors"); f != nil && len(f.Definition().ParamTypes()) == 0 {
			st.running = f // its stack, as a call's (stack.go)
			_, err := f.Call(ctx)
			st.running = nil
			if err != nil {
				return fmt.Errorf("__wasm_call_ctors: %w", err)
			}
		}
	}
	if f := mod.ExportedFunction("hs_init"); f != nil && len(f.Definition().ParamTypes()) == 2 {
		st.running = f
		_, err := f.Call(ctx, 0, 0)
		st.running = nil
		if err != nil {
			return fmt.Errorf("hs_init: %w", err)
		}
	}
	return nil
}

// handleName is the export each call of the pool's instances runs.
func (p *Pool) handleName() string {
	if p.ext != "" {
		return p.ext
	}
	return "wqhost_handle"
}

// callExtism hands in to an Extism plugin's function and turns its result into the
// message's: exit code 0 without an error is success, and the output (output_set) goes to
// the binding's output queue; a non-zero code or an error (error_set) fails the message with
// ErrPluginFailed and that reason. A WASI exit (proc_exit) ends the instance: exit code 0 is
// success.
func (p *Pool) callExtism(ctx context.Context, in *Input, out *Result) error {
	who := callee{id: in.ID}
	inst, err := p.checkoutMetered(ctx, who, &out.Usage)
	if err != nil {
		return err
	}
	out.Verdict, out.RetryAfter, out.ErrorText, out.HTTP = 0, 0, "", HTTPReport{}
	out.first[0] = Emitted{}
	out.Outputs = out.first[:0]
	st := inst.st
	x := st.ext
	st.beginSingle(in, out)
	x.begin()
	inst.stack[0] = 0
	rc, discard, err := p.invoke(ctx, inst, inst.handle, who)
	if err != nil {
		var exit *sys.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 0 && !errors.Is(err, ErrTimeout) {
			// proc_exit(0): the instance is spent, the call succeeded (invoke counted it a
			// trap).
			err, rc = nil, 0
			p.traps.Add(-1)
		}
	}
	if err == nil {
		err = p.extismResult(st, who, rc, out)
	}
	out.held = st.takeHeld()
	if err != nil {
		out.Release()
	}
	st.end()
	x.reset()
	p.checkin(inst, discard)
	return err
}

// extismResult reads a finished call's error and output.
func (p *Pool) extismResult(st *callState, who callee, rc int32, out *Result) error {
	x := st.ext
	var reason string
	if x.errOff != 0 {
		if b, ok := x.block(x.errOff); ok {
			reason = reasonText(b)
		} else {
			reason = "error_set with an offset that is no memory block"
		}
	}
	if rc != 0 || reason != "" {
		if reason == "" {
			reason = "no error message"
		}
		out.Outputs = nil
		return fmt.Errorf("runtime: %s: %w (code %d): %s", who, ErrPluginFailed, rc, reason)
	}
	if !x.outSet || x.outLen == 0 || p.cfg.OutputQueue == "" {
		return nil
	}
	if x.outOff+x.outLen > uint64(x.k.top) {
		return fmt.Errorf("runtime: %s: %w: output_set names bytes the plugin freed since", who, ErrPluginFailed)
	}
	body := x.k.buf[x.outOff : x.outOff+x.outLen]
	switch st.emit(&out.Outputs, nil, body) {
	case 0:
		return nil
	case errBudget:
		return fmt.Errorf("runtime: %s: output of %d bytes: %w", who, len(body), st.refused)
	case errTooLarge:
		return fmt.Errorf("runtime: %s: %w: output of %d bytes is over the binding's output limits (max_output_bytes %d)", who, ErrPluginFailed, len(body), p.cfg.MaxOutputBytes)
	default:
		return fmt.Errorf("runtime: %s: %w: output of %d bytes refused", who, ErrPluginFailed, len(body))
	}
}

// detectExtism is the ABI a module is checked against: a module asked to fit wqhost/v1 (the
// default) that imports extism:host/env and has no wqhost_abi_v1 marker is an Extism plugin.
func detectExtism(cm wazero.CompiledModule, abi ABI) ABI {
	if abi != ABIWqhostV1 {
		return abi
	}
	if _, ok := cm.ExportedFunctions()["wqhost_abi_v1"]; ok {
		return abi
	}
	for _, imp := range cm.ImportedFunctions() {
		if mod, _, _ := imp.Import(); mod == extismModuleName {
			return ABIExtism
		}
	}
	return abi
}

// extismUsesHTTP reports a plugin that imports http_request, for the warning a binding
// without an http: policy gets.
func extismUsesHTTP(cm wazero.CompiledModule) bool {
	for _, imp := range cm.ImportedFunctions() {
		if mod, fn, _ := imp.Import(); mod == extismModuleName && fn == "http_request" {
			return true
		}
	}
	return false
}
