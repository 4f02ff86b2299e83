package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/runtime"
)

const validateDoc = `
Checks a WebAssembly module against a guest ABI: the exports the ABI needs (wqhost_abi_v1,
wqhost_handle, memory for wqhost/v1; _start for wasi-stdio) with their signatures, and every
import (only wasi_snapshot_preview1 and, for wqhost/v1, the wqhost host functions with the
right signatures). A wqhost/v1 module is then loaded as the host loads it: compiled in a child
process under the compile budget (--compile-timeout, --compile-memory: a tenant's
limits.compile.timeout and limits.compile.memory), instantiated once, its start function and
its wqhost_self_test export (if any) run under --timeout. Exit code 0: fits; 1: does not fit
(each problem on its own line), its compile outran the budget, or its start function or self
test failed or did not return within --timeout; 2: no such file or unknown ABI.`

func (c *cli) validate(ctx context.Context, args []string) error {
	fl := c.flags("validate", "FILE.wasm [--abi wqhost/v1|wasi-stdio|extism] [--timeout D] [--compile-timeout D] [--compile-memory SIZE]", validateDoc)
	abi := fl.String("abi", string(runtime.ABIWqhostV1), "guest ABI to check against: wqhost/v1, wasi-stdio or extism")
	timeout := fl.Duration("timeout", config.DefaultTimeout, "time limit of the start function and of the self test (a binding's limits.timeout)")
	budget := compileBudgetFlags(fl)
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 1 {
		return usagef("want exactly one module file, got %d arguments (see --help)", fl.NArg())
	}
	path := fl.Arg(0)
	a := runtime.ABI(*abi)
	if a != runtime.ABIWqhostV1 && a != runtime.ABIWasiStdio && a != runtime.ABIExtism {
		return usagef("--abi %q: unknown ABI (want %s, %s or %s)", *abi, runtime.ABIWqhostV1, runtime.ABIWasiStdio, runtime.ABIExtism)
	}
	if *timeout <= 0 {
		return usagef("--timeout %s: must be above 0", *timeout)
	}
	compileTimeout, compileMemory, err := budget()
	if err != nil {
		return err
	}
	if err := source.CheckFile(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return usagef("%s: no such file", path)
		}
		return usagef("%v", err) // a directory, FIFO or device: exit 2 at once, never read
	}
	// Loaded as a host loads it: a start function that never returns, or a failing self
	// test, would pass the static checks but never serve.
	info, err := runtime.ValidateAndStart(ctx, path, a, runtime.ValidateOptions{
		Timeout: *timeout, CompileTimeout: compileTimeout, CompileMemoryBytes: compileMemory})
	if err == nil {
		if info.ABI != "" {
			a = info.ABI // detected: an Extism plugin asked to fit the default
		}
		fmt.Fprintf(c.stdout, "%s: ok, fits abi %s\n", path, a)
		if a == runtime.ABIExtism {
			fmt.Fprintf(c.stdout, "  functions: %s (a binding names the one each message calls with function:, default %s)\n",
				strings.Join(info.ExtismFunctions, ", "), runtime.DefaultExtismFunction)
		}
		if a == runtime.ABIWqhostV1 {
			if info.HandlesBatches {
				fmt.Fprintf(c.stdout, "  batches: yes, exports wqhost_handle_batch (a binding may set batch:)\n")
			} else {
				fmt.Fprintf(c.stdout, "  batches: no wqhost_handle_batch export (a binding with batch: refuses it)\n")
			}
		}
		return nil
	}
	// The static checks join the problems with "; " after "does not fit abi X: ".
	msg := err.Error()
	marker := fmt.Sprintf("does not fit abi %s: ", a)
	if i := strings.Index(msg, marker); i >= 0 {
		problems := strings.Split(msg[i+len(marker):], "; ")
		fmt.Fprintf(c.stdout, "%s: does not fit abi %s (%s):\n", path, a, plural(len(problems), "problem"))
		for _, p := range problems {
			fmt.Fprintf(c.stdout, "  - %s\n", p)
		}
		return fmt.Errorf("%s does not fit abi %s", path, a)
	}
	if errors.Is(err, runtime.ErrCompileBudget) {
		fmt.Fprintf(c.stdout, "%s: does not load: %s\n", path, termSafe(err.Error()))
		return fmt.Errorf("%s does not load (--compile-timeout %s, --compile-memory %s)", path, compileTimeout, config.ByteSize(compileMemory))
	}
	if errors.Is(err, runtime.ErrTimeout) || errors.Is(err, runtime.ErrSelfTest) {
		fmt.Fprintf(c.stdout, "%s: fits abi %s but does not load: %s\n", path, a, termSafe(err.Error()))
		return fmt.Errorf("%s does not load (--timeout %s)", path, *timeout)
	}
	return err
}

// compileBudgetFlags adds --compile-timeout and --compile-memory to fl, the compile budget a
// tenant's limits.compile.timeout and limits.compile.memory set on a host, with the same
// defaults and bounds. The func it returns reads them once fl is parsed.
func compileBudgetFlags(fl *pflag.FlagSet) func() (time.Duration, uint64, error) {
	timeout := fl.Duration("compile-timeout", runtime.DefaultCompileTimeout, "wall-clock time the module's compile may take (a tenant's limits.compile.timeout)")
	memory := fl.String("compile-memory", "1GiB", "resident memory the module's compile may use (a tenant's limits.compile.memory)")
	return func() (time.Duration, uint64, error) {
		if *timeout <= 0 || *timeout > time.Hour {
			return 0, 0, usagef("--compile-timeout %s: want above 0 and at most 1h (as limits.compile.timeout)", *timeout)
		}
		mem, err := config.ParseByteSize(*memory)
		if err != nil || mem < 64<<20 || mem > 64<<30 {
			return 0, 0, usagef("--compile-memory %q: want a size within 64MiB..64GiB (as limits.compile.memory)", *memory)
		}
		return *timeout, uint64(mem), nil
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
