package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wqhost/wqhost/runtime/internal/fuel"
)

// The compile budget's second line: loading a new module version — validating it against
// its ABI (wazero's decoder, validator and the interpreter's compile, which the checker uses
// to read imports and exports), instrumenting it, and the optimizing compile of what its
// pools will run — happens in a child process, a re-execution of the host's own binary,
// under a resident-memory watchdog, a CPU-time limit (RLIMIT_CPU) and a wall-clock
// deadline. The child fills the engine's cache directory: wazero's compiled code, the sealed
// instrumented copy (fuelcache.go) and the module's facts (its ABI's optional exports,
// whether the fuel copy compiled), sealed too; the host reads the facts and its tenants'
// runtimes load the machine code from the cache.
//
// Why: the structural caps (shape.go) bound what one function costs, but wazero's work is
// still linear in the number of such functions, and nothing in wazero can be interrupted
// once a compile has begun: a goroutine given up on would go on using the CPU and memory it
// was denied. A process can be killed. Only machine code compiled by the same wazero for the
// same bytes crosses over, through wazero's own file cache, keyed by the bytes' hash.
//
// What the host still does itself: on the cache hit wazero decodes and validates the module
// again (runtime.CompileModule validates before it asks the engine's cache) and reads the
// machine code; that is a small part of a load: 127 ms against the 3.5 s compile of
// billing-go (3.4 MB); 13 ms against 3.4 s for 10,000 branches in one function; 37 ms and
// 19 MB against 0.9 s and 370 MB (1 GB with the checker's interpreter compile) for one
// straight-line function of 6 MB.
//
// When: with a compilation cache directory (a host always has one: cache_dir, default
// <data_dir>/cache), EngineConfig.CompileInChild, and a binary that calls RunCompileChild.
// Without a directory the child's work could not be handed over, so `wqhost validate` and
// `wqhost call`, which keep no cache, load in process under the caps alone. A version that
// loaded through a child once has its facts in the directory, so restarts and reloads to a
// known version start no child.

// factsVersion is the version of moduleFacts' fields: facts written by a host that knew
// fewer (no load_bytes), or measured them otherwise (3: load_bytes counts the machine code,
// loadcost.go), are not read.
const factsVersion = 3

// compileChildEnv marks a process started as a compile child; its value is the cache dir.
const compileChildEnv = "WQHOST_COMPILE_CHILD"

// Child parameters, in its environment.
const (
	childNameEnv = "WQHOST_COMPILE_NAME" // the module's name, for its errors
	childABIEnv  = "WQHOST_COMPILE_ABI"
	childCPUEnv  = "WQHOST_COMPILE_CPU" // RLIMIT_CPU in seconds
	childOK      = "wqhost compile child: ok"
)

// Defaults of the compile budget (EngineConfig).
const (
	// DefaultCompileTimeout is the wall-clock time a child may take for one module.
	DefaultCompileTimeout = 2 * time.Minute
	// DefaultCompileMemoryBytes is a child's resident memory: the largest module this
	// project builds (billing-go, 3.4 MB) compiles in 60 MB.
	DefaultCompileMemoryBytes = 1 << 30
)

// ErrCompileBudget marks a module whose compile ran out of its time or memory budget.
var ErrCompileBudget = errors.New("compile budget exceeded")

// RunCompileChild does a compile child's work and exits if this process was started as one
// (by an Engine with CompileInChild); otherwise it returns at once. A program that sets
// EngineConfig.CompileInChild calls it first in main (wqhost does), and a test binary first
// in TestMain, so that the child re-execution of the binary compiles instead of running the
// program.
func RunCompileChild() {
	dir, ok := os.LookupEnv(compileChildEnv)
	if !ok {
		childCapable.Store(true)
		return
	}
	f, err := compileChild(dir, os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	b, _ := json.Marshal(f)
	fmt.Printf("%s %s\n", childOK, b)
	os.Exit(0)
}

// moduleFacts is what a child learnt of a module that fits its ABI: all the host needs to
// serve it without reading it again (the instrumented copy is in the cache directory).
type moduleFacts struct {
	SelfTest bool `json:"self_test"`
	UsesHTTP bool `json:"uses_http"`
	Batch    bool `json:"batch"`
	// ABI is the one validation settled on (an Extism plugin is detected by its imports
	// when the binding named none), and Functions an Extism plugin's callable exports.
	ABI       ABI      `json:"abi,omitempty"`
	Functions []string `json:"functions,omitempty"`
	// Fuel: the fuel-instrumented copy compiled; false runs the module's own bytes under
	// close-on-context-done.
	Fuel bool `json:"fuel"`
	// LoadBytes is what loading the compiled module from the cache cost the child, as the
	// host will load it into each tenant runtime: the peak of its resident memory above
	// where it was, or what the loaded module kept, whichever is more (loadcost.go).
	LoadBytes int64 `json:"load_bytes"`
}

// compileChild validates the module on in against its ABI, instruments it (into dir) and
// compiles what a pool will run (into dir), and returns its facts.
func compileChild(dir string, in io.Reader) (moduleFacts, error) {
	var f moduleFacts
	cpu, err := strconv.ParseUint(os.Getenv(childCPUEnv), 10, 64)
	if err != nil {
		return f, fmt.Errorf("%s: %w", childCPUEnv, err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &syscall.Rlimit{Cur: cpu, Max: cpu}); err != nil {
		return f, fmt.Errorf("setrlimit RLIMIT_CPU: %w", err)
	}
	wasm, err := io.ReadAll(in)
	if err != nil {
		return f, err
	}
	ctx := context.Background()
	e, err := NewEngine(ctx, EngineConfig{CacheDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return f, err
	}
	name := os.Getenv(childNameEnv)
	c, err := e.check.validate(ctx, name, wasm, ABI(os.Getenv(childABIEnv)))
	if err != nil {
		return f, err
	}
	c.digest = digestOfBytes(wasm)
	c.fuel = e.instrument(name, c)
	f = moduleFacts{SelfTest: c.selfTest, UsesHTTP: c.usesHTTP, Batch: c.batch, ABI: c.abi, Functions: c.functions}
	compile := func(b []byte, terminate bool) error {
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
			WithCompilationCache(e.cache).WithCloseOnContextDone(terminate))
		_, err := compileModule(ctx, rt, b)
		return err
	}
	if c.fuel != nil {
		f.Fuel = compile(c.fuel.wasm, false) == nil
	}
	run := c.wasm
	if f.Fuel {
		run = c.fuel.wasm
	} else if err := compile(c.wasm, true); err != nil {
		return f, fmt.Errorf("runtime: %s: %w", name, err)
	}
	f.LoadBytes = measureLoad(ctx, dir, run, !f.Fuel)
	return f, nil
}

func digestOfBytes(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// validateInChild does in a child process, within budget, what a load does to a new module
// version: validate it against abi, instrument it and compile what its pools will run, into
// the cache directory. It returns the module ready to serve; its facts are kept in the
// directory (a file named by digest and ABI), so a module that loaded before starts no child.
func (e *Engine) validateInChild(ctx context.Context, name string, wasm []byte, digest string, abi ABI, l CompileLimits) (*compiled, error) {
	// Named by wazero's version too: a host upgraded to another wazero finds none of its
	// machine code in the cache, and must compile in a child again, not in process.
	facts := filepath.Join(e.cacheDir, fmt.Sprintf("wqhost-module-v%d.%d-%s-%s-%s.json",
		fuel.Version, factsVersion, wazeroVersion(), digest, strings.ReplaceAll(string(abi), "/", "_")))
	f, err := readFacts(facts, digest, abi)
	if err != nil {
		if f, err = e.runChild(ctx, name, wasm, abi, l); err != nil {
			return nil, err
		}
		if err := writeAtomic(facts, sealFacts(digest, abi, f)); err != nil {
			e.logger.Warn("module facts not cached; the next load validates it in a child again", "module", name, "err", err)
		}
	}
	c := &compiled{abi: abi, wasm: wasm, digest: digest, selfTest: f.SelfTest, usesHTTP: f.UsesHTTP, batch: f.Batch,
		functions: f.Functions, loadBytes: f.LoadBytes}
	if f.ABI != "" {
		c.abi = f.ABI
	}
	if f.Fuel {
		c.fuel = e.instrument(name, c) // the child's sealed copy, or instrumented again
	}
	return c, nil
}

func (e *Engine) runChild(ctx context.Context, name string, wasm []byte, abi ABI, l CompileLimits) (moduleFacts, error) {
	var f moduleFacts
	// /proc/self/exe is this process's binary even after an upgrade replaced the file.
	exe := "/proc/self/exe"
	if _, err := os.Stat(exe); err != nil {
		if exe, err = os.Executable(); err != nil {
			return f, fmt.Errorf("runtime: %s: compile child: %w", name, err)
		}
	}
	timeout, memory := e.budget.timeout, e.budget.memory
	if l.Timeout > 0 {
		timeout = l.Timeout
	}
	if l.MemoryBytes > 0 {
		memory = l.MemoryBytes
	}
	// Children share the host: each reserves its whole memory limit from the host's budget
	// (at most half of the budget, so two children at most fit an empty one), and at most
	// GOMAXPROCS run at once. Past either, a load waits its turn rather than fail: four
	// large versions compile one after another, not at once. The wait has its own bound,
	// the compile timeout again: tenants holding the budget may leave no room for long.
	if lim := e.mem.usage().Limit; lim > 0 && memory > uint64(lim/2) {
		memory = uint64(lim / 2)
	}
	wctx, stopWait := context.WithTimeoutCause(ctx, timeout,
		fmt.Errorf("no room for a compile child for %s (compile timeout)", timeout))
	defer stopWait()
	if err := e.mem.reserveWait(wctx, ConsumerCompile, int64(memory), "compiling "+name); err != nil {
		return f, fmt.Errorf("runtime: %s: compile child: %w", name, err)
	}
	defer e.mem.release(ConsumerCompile, int64(memory))
	select {
	case e.children <- struct{}{}:
		defer func() { <-e.children }()
	case <-wctx.Done():
		return f, fmt.Errorf("runtime: %s: compile child: waiting for a turn: %w", name, context.Cause(wctx))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// -test.run matches no test: should a test binary run without RunCompileChild in its
	// TestMain after all, it exits at once instead of running its tests.
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(),
		compileChildEnv+"="+e.cacheDir,
		childNameEnv+"="+name,
		childABIEnv+"="+string(abi),
		childCPUEnv+"="+strconv.FormatInt(int64(timeout/time.Second)+1, 10))
	cmd.Stdin = bytes.NewReader(wasm)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limitedWriter{w: &stdout, n: 4 << 10}, &limitedWriter{w: &stderr, n: 4 << 10}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return f, fmt.Errorf("runtime: %s: compile child: %w", name, err)
	}
	overMemory := watchRSS(cmd.Process.Pid, memory, cmd.Process.Kill)
	err := cmd.Wait()
	over := overMemory()
	took := time.Since(start)
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss << 10
	}
	e.logger.Debug("module compiled in a child", "module", name, "took", took, "peak_rss", rss, "err", err)
	out := strings.TrimSpace(stdout.String())
	switch {
	case over:
		return f, fmt.Errorf("runtime: %s: %w: compiling needed more than %d bytes of memory (compile memory)", name, ErrCompileBudget, memory)
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return f, fmt.Errorf("runtime: %s: %w: compiling took more than %s (compile timeout)", name, ErrCompileBudget, timeout)
	case ctx.Err() != nil:
		return f, fmt.Errorf("runtime: %s: compile: %w", name, ctx.Err())
	case err == nil && strings.HasPrefix(out, childOK+" "):
		if jerr := json.Unmarshal([]byte(strings.TrimPrefix(out, childOK+" ")), &f); jerr != nil {
			return f, fmt.Errorf("runtime: %s: compile child's answer %q: %w", name, out, jerr)
		}
		return f, nil
	case err == nil:
		return f, errNoChild
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGXCPU {
		return f, fmt.Errorf("runtime: %s: %w: compiling used more than %s of CPU time", name, ErrCompileBudget, timeout)
	}
	msg := strings.TrimSpace(stderr.String())
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 && msg != "" {
		// The module's own error, worded as in process; a wazero panic keeps its mark.
		if i := strings.Index(msg, ErrCompilerPanic.Error()); i >= 0 {
			return f, fmt.Errorf("runtime: %s: %w%s", name, ErrCompilerPanic, msg[i+len(ErrCompilerPanic.Error()):])
		}
		return f, errors.New(msg)
	}
	return f, fmt.Errorf("runtime: %s: compile in a child process: %v: %s", name, err, msg)
}

// childCapable says this binary called RunCompileChild: only then may an engine re-execute
// it as a compile child. Process-wide state on purpose: it is a property of the binary, not
// of an engine, and a binary that does not answer as a child (another package's test binary,
// a library user's program) would otherwise run its own main, or TestMain, in the child:
// tests, builds, even a second host.
var childCapable atomic.Bool

// errNoChild: the binary does not call RunCompileChild (a test binary of a package that does
// not); the module is compiled in process.
var errNoChild = errors.New("the binary does not run compile children (no RunCompileChild in its main)")

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// compileBudget is a child's: its wall-clock deadline (and CPU time) and address space.
type compileBudget struct {
	child   bool
	timeout time.Duration
	memory  uint64
}

// useChild says whether loads run in a child: asked for, with a cache directory to hand the
// work over in, and a binary that answers as a child.
func (e *Engine) useChild() bool {
	if !e.budget.child || e.cacheDir == "" || e.childless.Load() {
		return false
	}
	if !childCapable.Load() {
		if !e.childless.Swap(true) {
			e.logger.Warn("compiling in process, without a time or memory budget: the binary does not call runtime.RunCompileChild")
		}
		return false
	}
	return true
}

// watchRSS polls the resident memory of process pid every 10 ms and calls kill once it is
// above limit; the function it returns says whether it did, and stops the polling. Why not
// RLIMIT_AS: the Go runtime reserves address space far beyond what it uses (the race
// detector terabytes), so an address-space limit is either no bound or fatal. What a poll
// can miss is what the child allocates in one interval.
func watchRSS(pid int, limit uint64, kill func() error) (stop func() bool) {
	done, result := make(chan struct{}), make(chan bool, 1)
	statm := fmt.Sprintf("/proc/%d/statm", pid)
	page := uint64(os.Getpagesize())
	go func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				result <- false
				return
			case <-t.C:
			}
			b, err := os.ReadFile(statm)
			if err != nil {
				continue
			}
			var size, resident uint64
			if _, err := fmt.Sscan(string(b), &size, &resident); err == nil && resident*page > limit {
				_ = kill()
				<-done
				result <- true
				return
			}
		}
	}()
	return func() bool {
		close(done)
		return <-result
	}
}

// wazeroVersion is the version of wazero built into this binary, "unknown" without build
// information.
func wazeroVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				if d.Replace != nil {
					return strings.ReplaceAll(d.Replace.Version+"-replaced", "/", "_")
				}
				return d.Version
			}
		}
	}
	return "unknown"
}
