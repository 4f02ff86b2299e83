// Package engine runs one handler logic (no-op, count-vowels, billing) on one execution engine
// (wqhost's pooled runtime, Extism's Go SDK, instantiate-per-message, plain Go) behind one
// interface, so that every comparison does the same work and differs only in the host.
package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	wqruntime "github.com/wqhost/wqhost/runtime"
)

// Logic is the work a handler does per message.
type Logic string

// The logics compared. Each has the same behaviour on every engine that supports it.
const (
	// Noop accepts the message without reading it (Extism's noop plugin, run_test).
	Noop Logic = "noop"
	// Vowels counts the body's vowels and emits {"count","total","vowels"} (Extism's
	// count_vowels plugin).
	Vowels Logic = "vowels"
	// Billing prices a JSON transaction and emits a priced line (examples/handlers/billing-go).
	Billing Logic = "billing"
)

// Logics lists every logic.
var Logics = []Logic{Noop, Vowels, Billing}

// Kind is the execution engine.
type Kind string

// The engines.
const (
	// Go is the logic as a plain Go function: the floor.
	Go Kind = "go"
	// Wqhost is wqhost's pooled runtime with the Go-SDK handler, per-call time limit on.
	Wqhost Kind = "wqhost"
	// WqhostNoTimeout is the same pool with the time limit off.
	WqhostNoTimeout Kind = "wqhost-notimeout"
	// WqhostRust is wqhost's pool with the Rust-SDK handler (count-vowels-rust, the same
	// char-by-char test as Extism's Rust count_vowels plugin) and the default time limit on.
	WqhostRust Kind = "wqhost-rust"
	// WqhostPerChar is wqhost's pool with count-vowels-perchar-go, standard Go testing each
	// char against the vowel list as Extism's plugin does, the default time limit on.
	WqhostPerChar Kind = "wqhost-perchar"
	// WqhostPerCharTinyGo is the same per-char source built by TinyGo.
	WqhostPerCharTinyGo Kind = "wqhost-perchar-tinygo"
	// WqhostTinyGo is wqhost's pool with the same Go-SDK handler built by TinyGo
	// (-scheduler=none -no-debug, examples/handlers/*-tinygo) and the default time limit on.
	WqhostTinyGo Kind = "wqhost-tinygo"
	// Extism is Extism's Go SDK: one compiled plugin, one Instance per concurrent caller,
	// no time limit (the manifest's default).
	Extism Kind = "extism"
	// ExtismTimeout is the same with a manifest timeout, Extism's per-call time limit, to
	// compare with wqhost's pool with its limit on.
	ExtismTimeout Kind = "extism-timeout"
	// Instantiate is wqhost's runtime instantiating a fresh module per message (max_uses 1),
	// what a naive wazero host does.
	Instantiate Kind = "instantiate"
	// WqhostExtism is Extism's own plugin (the same file the Extism engine runs) in wqhost's
	// pool under abi extism, with the default time limit on: Extism plugins unchanged.
	WqhostExtism Kind = "wqhost-extism"
	// WqhostExtismTinyGo is the project's TinyGo Extism plugin
	// (examples/handlers/extism-vowels-tinygo) in wqhost's pool under abi extism, the default
	// time limit on.
	WqhostExtismTinyGo Kind = "wqhost-extism-tinygo"
	// ExtismTinyGo is the same file in Extism's Go SDK, as Extism runs it.
	ExtismTinyGo Kind = "extism-tinygo"
)

// MemoryPages is the linear memory cap of every engine, in 64 KiB pages: wqhost's tenant
// default (128 MiB), given to Extism's plugins too (manifest memory.max_pages), so that
// neither side runs with more room than the other.
const MemoryPages = wqruntime.DefaultMemoryPages

// DefaultTimeout is the per-call time limit of the wqhost engines that run with one: the
// host's default (pool.timeout).
const DefaultTimeout = 30 * time.Second

// Kinds lists every engine, floor first.
var Kinds = []Kind{Go, Wqhost, WqhostNoTimeout, WqhostRust, WqhostTinyGo, WqhostPerChar, WqhostPerCharTinyGo,
	WqhostExtism, WqhostExtismTinyGo, Extism, ExtismTinyGo, ExtismTimeout, Instantiate}

// Caller runs one message through the logic. Call is safe for up to the concurrency the
// caller was opened with; more callers wait.
type Caller interface {
	// Call handles body and returns the emitted output (nil for Noop). A message the logic
	// refuses returns an error wrapping ErrRejected.
	Call(ctx context.Context, body []byte) ([]byte, error)
	// Close releases the engine.
	Close(ctx context.Context) error
}

// ErrRejected marks a message the handler rejected (it would be dead-lettered).
var ErrRejected = errors.New("handler rejected the message")

// ErrUnsupported is returned by Open for a logic an engine has no module for.
var ErrUnsupported = errors.New("no module for this logic on this engine")

// Paths locates the modules.
type Paths struct {
	// Repo is the wqhost checkout (holds examples/handlers).
	Repo string
	// ExtismWasm is the go-sdk module's wasm/ folder.
	ExtismWasm string
	// CacheDir is an on-disk wazero compilation cache shared by every engine, so that
	// opening an engine again does not recompile; empty compiles every time.
	CacheDir string
}

// wqhostModule is the examples/handlers module for a logic, per engine (Go SDK built by Go or
// TinyGo, Rust SDK).
func (p Paths) wqhostModule(l Logic, k Kind) (string, error) {
	name := map[Logic]string{Noop: "noop-go", Vowels: "count-vowels-go", Billing: "billing-go"}[l]
	switch k {
	case WqhostRust:
		name = map[Logic]string{Vowels: "count-vowels-rust"}[l]
	case WqhostPerChar:
		name = map[Logic]string{Vowels: "count-vowels-perchar-go"}[l]
	case WqhostPerCharTinyGo:
		name = map[Logic]string{Vowels: "count-vowels-perchar-tinygo"}[l]
	case WqhostExtismTinyGo, ExtismTinyGo:
		name = map[Logic]string{Vowels: "extism-vowels-tinygo"}[l]
	case WqhostTinyGo:
		name = map[Logic]string{Noop: "noop-tinygo", Vowels: "count-vowels-tinygo", Billing: "billing-tinygo"}[l]
	}
	if name == "" {
		return "", ErrUnsupported
	}
	return filepath.Join(p.Repo, "examples", "handlers", name, name+".wasm"), nil
}

// Open starts engine k running logic l for up to conc concurrent calls.
func Open(ctx context.Context, k Kind, l Logic, conc int, p Paths) (Caller, error) {
	if conc < 1 {
		conc = 1
	}
	switch k {
	case Go:
		return openNative(l)
	case Wqhost, WqhostNoTimeout, WqhostRust, WqhostTinyGo, WqhostPerChar, WqhostPerCharTinyGo, Instantiate:
		path, err := p.wqhostModule(l, k)
		if err != nil {
			return nil, fmt.Errorf("engine %s, logic %s: %w", k, l, err)
		}
		cfg := wqruntime.PoolConfig{
			Binding: "bench", OutputQueue: "out", MinInstances: conc, MaxInstances: conc,
			Timeout: DefaultTimeout, Config: map[string]string{"tax_rate": "0.2"},
		}
		switch k {
		case WqhostNoTimeout:
			cfg.Timeout = 0
		case Instantiate:
			cfg.MinInstances, cfg.MaxUses = 0, 1
		}
		return openWqhost(ctx, path, p.CacheDir, cfg)
	case WqhostExtism, WqhostExtismTinyGo:
		path, fn, err := p.extismPlugin(l, k)
		if err != nil {
			return nil, fmt.Errorf("engine %s, logic %s: %w", k, l, err)
		}
		cfg := wqruntime.PoolConfig{
			Binding: "bench", OutputQueue: "out", MinInstances: conc, MaxInstances: conc,
			Timeout: DefaultTimeout, Function: fn,
		}
		return openWqhostABI(ctx, path, p.CacheDir, cfg, wqruntime.ABIExtism)
	case Extism, ExtismTinyGo:
		return openExtism(ctx, k, l, conc, 0, p)
	case ExtismTimeout:
		return openExtism(ctx, k, l, conc, DefaultTimeout, p)
	default:
		return nil, fmt.Errorf("engine %q: unknown (want one of %v)", k, Kinds)
	}
}

type wqhostCaller struct {
	e    *wqruntime.Engine
	pool *wqruntime.Pool
	// spare is a callBuf no call is using: a call takes it (or makes one when calls overlap)
	// and leaves it back, reusing its Input and Output as a listener worker reuses its own,
	// so a call allocates only what the guest emits.
	spare atomic.Pointer[callBuf]
}

type callBuf struct {
	in  wqruntime.Input
	out wqruntime.Result
}

func openWqhost(ctx context.Context, path, cacheDir string, cfg wqruntime.PoolConfig) (*wqhostCaller, error) {
	return openWqhostABI(ctx, path, cacheDir, cfg, wqruntime.ABIWqhostV1)
}

func openWqhostABI(ctx context.Context, path, cacheDir string, cfg wqruntime.PoolConfig, abi wqruntime.ABI) (*wqhostCaller, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("engine wqhost: %w", err)
	}
	e, err := wqruntime.NewEngine(ctx, wqruntime.EngineConfig{CacheDir: cacheDir})
	if err != nil {
		return nil, err
	}
	m, err := e.Compile(ctx, path, wasm, abi)
	if err != nil {
		_ = e.Close(ctx)
		return nil, err
	}
	t, err := e.Tenant("bench", wqruntime.TenantLimits{MemoryPages: MemoryPages})
	if err != nil {
		_ = e.Close(ctx)
		return nil, err
	}
	pool, err := t.NewPool(ctx, m, cfg)
	if err != nil {
		_ = e.Close(ctx)
		return nil, err
	}
	return &wqhostCaller{e: e, pool: pool}, nil
}

func (c *wqhostCaller) Call(ctx context.Context, body []byte) ([]byte, error) {
	buf := c.spare.Swap(nil)
	if buf == nil {
		buf = new(callBuf)
	}
	defer c.spare.Store(buf)
	buf.in = wqruntime.Input{ID: "bench", Queue: "bench", Body: body}
	out := &buf.out
	if err := c.pool.CallInto(ctx, &buf.in, out); err != nil {
		return nil, err
	}
	switch out.Verdict {
	case wqruntime.VerdictOK:
	case wqruntime.VerdictReject:
		return nil, fmt.Errorf("%w: %s", ErrRejected, out.ErrorText)
	default:
		return nil, fmt.Errorf("engine wqhost: status %d: %s", out.Verdict, out.ErrorText)
	}
	if len(out.Outputs) == 0 {
		return nil, nil
	}
	return out.Outputs[0].Body, nil
}

func (c *wqhostCaller) Close(ctx context.Context) error {
	return errors.Join(c.pool.Close(ctx), c.e.Close(ctx))
}

// FindExtismWasm returns the wasm/ folder of the github.com/extism/go-sdk module that the
// bench module requires, asking the go command (run from dir, inside the bench module).
func FindExtismWasm(dir string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/extism/go-sdk")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating the extism go-sdk module (run `go mod download` in bench/): %w", err)
	}
	d := filepath.Join(strings.TrimSpace(string(out)), "wasm")
	if _, err := os.Stat(filepath.Join(d, "count_vowels.wasm")); err != nil {
		return "", fmt.Errorf("extism plugins: %w", err)
	}
	return d, nil
}

// FindRepo walks up from dir to the wqhost checkout (the directory with examples/handlers
// and the main go.mod).
func FindRepo(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/wqhost/wqhost\n") {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no wqhost checkout (go.mod of github.com/wqhost/wqhost) above %s", dir)
		}
		d = parent
	}
}

// ModulePath is the examples/handlers module engine k runs for logic l (wqhost engines only).
func (p Paths) ModulePath(l Logic, k Kind) (string, error) { return p.wqhostModule(l, k) }
