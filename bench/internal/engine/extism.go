package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
)

// extismCaller pools plugin instances the way Extism allows: a CompiledPlugin is shared and
// each concurrent caller needs its own Instance (a Plugin is not safe for concurrent use).
type extismCaller struct {
	compiled *extism.CompiledPlugin
	fn       string
	idle     chan *extism.Plugin
	all      []*extism.Plugin
}

// extismPlugin is the Extism plugin file and function engine k runs for logic l: the go-sdk's
// own plugins (noop.wasm, count_vowels.wasm), or for the TinyGo engines the project's
// examples/handlers/extism-vowels-tinygo.
func (p Paths) extismPlugin(l Logic, k Kind) (path, fn string, err error) {
	if k == WqhostExtismTinyGo || k == ExtismTinyGo {
		if l != Vowels {
			return "", "", ErrUnsupported
		}
		path, err := p.wqhostModule(l, k)
		return path, "count_vowels", err
	}
	switch l {
	case Noop:
		return filepath.Join(p.ExtismWasm, "noop.wasm"), "run_test", nil
	case Vowels:
		return filepath.Join(p.ExtismWasm, "count_vowels.wasm"), "count_vowels", nil
	}
	return "", "", ErrUnsupported
}

// openExtism opens engine k (an Extism kind) for logic l in Extism's Go SDK.
func openExtism(ctx context.Context, k Kind, l Logic, conc int, timeout time.Duration, paths Paths) (*extismCaller, error) {
	path, fn, err := paths.extismPlugin(l, k)
	if err != nil {
		return nil, fmt.Errorf("engine %s, logic %s: %w", k, l, err)
	}
	return openExtismFile(ctx, path, fn, conc, timeout, paths.CacheDir)
}

// openExtismFile opens the plugin at path for calls of fn in Extism's Go SDK, its linear
// memory capped at MemoryPages (manifest memory.max_pages) as wqhost's tenants are, its vars
// and HTTP responses at Extism's defaults, and timeout as the manifest's (0: none, Extism's
// default).
func openExtismFile(ctx context.Context, path, fn string, conc int, timeout time.Duration, cacheDir string) (*extismCaller, error) {
	file := filepath.Base(path)
	m := extism.Manifest{
		Wasm:    []extism.Wasm{extism.WasmFile{Path: path}},
		Timeout: uint64(timeout / time.Millisecond),
		Memory:  &extism.ManifestMemory{MaxPages: MemoryPages, MaxHttpResponseBytes: -1, MaxVarBytes: -1},
	}
	rc := wazero.NewRuntimeConfig()
	if cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("engine extism: compilation cache %s: %w", cacheDir, err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	cp, err := extism.NewCompiledPlugin(ctx, m, extism.PluginConfig{EnableWasi: true, RuntimeConfig: rc}, nil)
	if err != nil {
		return nil, fmt.Errorf("engine extism: compile %s: %w", file, err)
	}
	c := &extismCaller{compiled: cp, fn: fn, idle: make(chan *extism.Plugin, conc)}
	for range conc {
		p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
		if err != nil {
			_ = c.Close(ctx)
			return nil, fmt.Errorf("engine extism: instance of %s: %w", file, err)
		}
		c.all = append(c.all, p)
		c.idle <- p
	}
	return c, nil
}

func (c *extismCaller) Call(ctx context.Context, body []byte) ([]byte, error) {
	var p *extism.Plugin
	select {
	case p = <-c.idle:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { c.idle <- p }()
	rc, out, err := p.CallWithContext(ctx, c.fn, body)
	if err != nil {
		return nil, fmt.Errorf("engine extism: %s: %w", c.fn, err)
	}
	if rc != 0 {
		return nil, fmt.Errorf("engine extism: %s returned %d", c.fn, rc)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func (c *extismCaller) Close(ctx context.Context) error {
	for _, p := range c.all {
		_ = p.Close(ctx)
	}
	return c.compiled.Close(ctx)
}
