package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wqhost/wqhost/internal/safefile"
)

// checker compiles modules in a runtime of its own to inspect their imports and exports.
type checker struct {
	rt   wazero.Runtime
	wasi map[string]api.FunctionDefinition
	host map[string]api.FunctionDefinition
	// extism is extism:host/env's functions (abi extism).
	extism map[string]api.FunctionDefinition
}

func newChecker(ctx context.Context) (*checker, error) {
	// The interpreter: the checker only reads a module's imports and exports, and wazero
	// validates a module the same way before either engine compiles it. Its "compilation"
	// costs a tenth of the optimizing compiler's (a 2 MB Go module: 0.2 s against 2.3 s,
	// and 2 s against 29 s under -race), and the pools compile what they run themselves:
	// the fuel-instrumented bytes for wqhost/v1, which no checker compilation could share.
	cfg := wazero.NewRuntimeConfigInterpreter()
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	_, err := wasi_snapshot_preview1.Instantiate(ctx, rt)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("runtime: validator: wasi: %w", err)
	}
	h, err := hostModule(rt).Instantiate(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("runtime: validator: host module: %w", err)
	}
	x, err := extismModule(rt).Instantiate(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("runtime: validator: %s host module: %w", extismModuleName, err)
	}
	return &checker{rt: rt, wasi: rt.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions(), host: h.ExportedFunctionDefinitions(),
		extism: x.ExportedFunctionDefinitions()}, nil
}

// Validate checks the module in the file at path against abi, without running it, and returns
// an error naming the file, the ABI and everything missing or unknown. It reads the module in
// process, under the structural caps (CompileLimits) alone; ValidateAndStart, what
// `wqhost validate` runs, also compiles it under a compile budget.
func Validate(ctx context.Context, path string, abi ABI) error {
	wasm, err := safefile.Read(path, safefile.DefaultMaxBytes)
	if err != nil {
		return fmt.Errorf("runtime: validate %s: %w", path, err)
	}
	if _, err := shapeNamed(path, wasm, CompileLimits{}); err != nil {
		return err
	}
	c, err := newChecker(ctx)
	if err != nil {
		return err
	}
	defer c.rt.Close(ctx)
	_, err = c.validate(ctx, path, wasm, abi)
	return err
}

// ValidateOptions are ValidateAndStart's limits. Zero fields take the defaults a binding
// gets.
type ValidateOptions struct {
	// Timeout limits the start function and the self test (0: no limit).
	Timeout time.Duration
	// MemoryPages is the linear memory limit (0: the default).
	MemoryPages uint32
	// CompileTimeout and CompileMemoryBytes are the compile budget (0:
	// DefaultCompileTimeout and DefaultCompileMemoryBytes), as a host's
	// limits.compile.timeout and limits.compile.memory.
	CompileTimeout     time.Duration
	CompileMemoryBytes uint64
}

// ValidateAndStart checks the module at path like Validate, then does what a load does
// before a module serves: it compiles the module under the compile budget, instantiates it
// once in a runtime of its own, its start function under the time and memory limits, and
// runs its wqhost_self_test export if it has one, under the time limit too. A start function
// or self test that never returns fails with ErrTimeout within the limit; a module whose
// compile outruns the budget fails with ErrCompileBudget. It is what `wqhost validate` runs.
//
// The compile runs in a child process, as a host's does (EngineConfig.CompileInChild), into
// a cache directory of its own that is removed on return: a module within every structural
// cap can still take minutes and gigabytes to compile, and a program that validates
// untrusted modules should not pay for that itself. A program that does not call
// RunCompileChild compiles in process, without the budget.
func ValidateAndStart(ctx context.Context, path string, abi ABI, opts ValidateOptions) (ModuleInfo, error) {
	wasm, err := safefile.Read(path, safefile.DefaultMaxBytes)
	if err != nil {
		return ModuleInfo{}, fmt.Errorf("runtime: validate %s: %w", path, err)
	}
	cache, err := os.MkdirTemp("", "wqhost-validate-")
	if err != nil {
		return ModuleInfo{}, fmt.Errorf("runtime: validate %s: compile cache: %w", path, err)
	}
	defer os.RemoveAll(cache)
	e, err := NewEngine(ctx, EngineConfig{Logger: slog.New(slog.DiscardHandler), CacheDir: cache,
		CompileInChild: true, CompileTimeout: opts.CompileTimeout, CompileMemoryBytes: opts.CompileMemoryBytes})
	if err != nil {
		return ModuleInfo{}, err
	}
	defer e.Close(context.WithoutCancel(ctx))
	m, err := e.Compile(ctx, path, wasm, abi)
	if err != nil {
		return ModuleInfo{}, err
	}
	info := ModuleInfo{ABI: m.ABI(), HandlesBatches: m.HandlesBatches(), ExtismFunctions: m.c.functions}
	pc := PoolConfig{Binding: "validate", Timeout: opts.Timeout, StartTimeout: opts.Timeout}
	if m.ABI() == ABIExtism {
		// The function is the binding's choice: any the plugin can run shows it starts.
		if len(m.c.functions) == 0 {
			return info, fmt.Errorf("runtime: %s: exports no function an Extism host can call (no parameters, an i32 result or none)", path)
		}
		pc.Function = m.c.functions[0]
		if slices.Contains(m.c.functions, DefaultExtismFunction) {
			pc.Function = DefaultExtismFunction
		}
	}
	t, err := e.Tenant("validate", TenantLimits{MemoryPages: opts.MemoryPages})
	if err != nil {
		return info, err
	}
	// The user's --timeout is the start function's limit too: no floor.
	return info, t.Validate(ctx, m, pc)
}

// ModuleInfo is what ValidateAndStart learnt of a module that fits its ABI.
type ModuleInfo struct {
	// ABI is the module's ABI: the one asked for, or extism when detected from the imports.
	ABI ABI
	// ExtismFunctions are an Extism plugin's functions a binding's function: may name.
	ExtismFunctions []string
	// HandlesBatches: the module exports wqhost_handle_batch, so a binding with batch: may
	// serve it (Module.HandlesBatches).
	HandlesBatches bool
}

func sigString(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ",") + ")"
	}
	return names(params) + "->" + names(results)
}

func (c *checker) validate(ctx context.Context, name string, wasm []byte, abi ABI) (*compiled, error) {
	if abi == "" {
		abi = ABIWqhostV1
	}
	if abi != ABIWqhostV1 && abi != ABIWasiStdio && abi != ABIExtism {
		return nil, fmt.Errorf("runtime: %s: unknown abi %q (supported: %s, %s, %s)", name, abi, ABIWqhostV1, ABIWasiStdio, ABIExtism)
	}
	cm, err := compileModule(ctx, c.rt, wasm)
	if errors.Is(err, ErrCompilerPanic) {
		return nil, fmt.Errorf("runtime: %s: %w", name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: %s: not a valid wasm module: %w", name, err)
	}
	// Nothing of the checker's compilation is kept: every module version's code would
	// otherwise stay in memory for the life of the engine.
	defer cm.Close(ctx)
	abi = detectExtism(cm, abi)

	var problems []string
	for _, imp := range cm.ImportedFunctions() {
		mod, fn, _ := imp.Import()
		var known map[string]api.FunctionDefinition
		switch mod {
		case wasi_snapshot_preview1.ModuleName:
			known = c.wasi
		case extismModuleName:
			if abi != ABIExtism {
				problems = append(problems, fmt.Sprintf("imports %s.%s, which only %s modules may use", mod, fn, ABIExtism))
				continue
			}
			known = c.extism
		case hostModuleName:
			if abi != ABIWqhostV1 {
				problems = append(problems, fmt.Sprintf("imports %s.%s, which only %s modules may use", mod, fn, ABIWqhostV1))
				continue
			}
			known = c.host
		default:
			problems = append(problems, fmt.Sprintf("imports unknown module %q (function %s)", mod, fn))
			continue
		}
		def, ok := known[fn]
		if !ok {
			problems = append(problems, fmt.Sprintf("imports unknown host function %s.%s", mod, fn))
			continue
		}
		if !slices.Equal(def.ParamTypes(), imp.ParamTypes()) || !slices.Equal(def.ResultTypes(), imp.ResultTypes()) {
			problems = append(problems, fmt.Sprintf("imports %s.%s with signature %s, want %s", mod, fn,
				sigString(imp.ParamTypes(), imp.ResultTypes()), sigString(def.ParamTypes(), def.ResultTypes())))
		}
	}
	exports := cm.ExportedFunctions()
	if _, ok := cm.ExportedMemories()["memory"]; !ok {
		problems = append(problems, "missing export memory")
	}
	want := func(name string, results ...api.ValueType) {
		def, ok := exports[name]
		if !ok {
			problems = append(problems, "missing export "+name)
			return
		}
		if len(def.ParamTypes()) != 0 || !slices.Equal(def.ResultTypes(), results) {
			problems = append(problems, fmt.Sprintf("export %s has signature %s, want %s", name,
				sigString(def.ParamTypes(), def.ResultTypes()), sigString(nil, results)))
		}
	}
	out := &compiled{abi: abi, wasm: wasm}
	switch abi {
	case ABIWqhostV1:
		if _, ok := exports["_start"]; ok {
			problems = append(problems, "exports _start (a command module: use abi wasi-stdio)")
		}
		if _, ok := exports["wqhost_abi_v1"]; ok {
			want("wqhost_abi_v1") // () -> (): a marker with another signature is not this ABI's
		} else {
			var others []string
			for n := range exports {
				if strings.HasPrefix(n, "wqhost_abi_v") {
					others = append(others, n)
				}
			}
			if len(others) > 0 {
				slices.Sort(others)
				problems = append(problems, fmt.Sprintf("declares %s; this host supports only wqhost_abi_v1", strings.Join(others, ", ")))
			} else {
				problems = append(problems, "missing export wqhost_abi_v1 (the ABI version marker)")
			}
		}
		want("wqhost_handle", api.ValueTypeI32)
		fp, usesHTTP := checkFeatures(cm)
		problems = append(problems, fp...)
		out.usesHTTP = usesHTTP
		if _, ok := exports["wqhost_handle_batch"]; ok {
			// Optional, but a batch handler with another signature is a mistake to refuse
			// at load, not a message failure at the first batch.
			want("wqhost_handle_batch", api.ValueTypeI32)
			out.batch = true
		}
		if _, ok := exports["wqhost_self_test"]; ok {
			want("wqhost_self_test", api.ValueTypeI32)
			out.selfTest = true
		}
		if _, ok := exports["_initialize"]; ok {
			want("_initialize")
		}
	case ABIWasiStdio:
		want("_start")
	case ABIExtism:
		// The function a binding calls is its own (function:), checked by NewPool.
		out.usesHTTP = extismUsesHTTP(cm)
		out.functions = extismCallable(exports)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("runtime: %s does not fit abi %s: %s", name, abi, strings.Join(problems, "; "))
	}
	return out, nil
}
