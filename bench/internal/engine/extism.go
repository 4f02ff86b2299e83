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

// extismPlugin is the go-sdk plugin and function of a logic.
func extismPlugin(l Logic) (file, fn string, err error) {
	switch l {
	case Noop:
		return "noop.wasm", "run_test", nil
	case Vowels:
		return "count_vowels.wasm", "count_vowels", nil
	}
	return "", "", ErrUnsupported
}

func openExtism(ctx context.Context, l Logic, conc int, timeout time.Duration, paths Paths) (*extismCaller, error) {
	file, fn, err := extismPlugin(l)
	if err != nil {
		return nil, fmt.Errorf("engine extism, logic %s: %w", l, err)
	}
	m := extism.Manifest{
		Wasm:    []extism.Wasm{extism.WasmFile{Path: filepath.Join(paths.ExtismWasm, file)}},
		Timeout: uint64(timeout / time.Millisecond),
	}
	rc := wazero.NewRuntimeConfig()
	if paths.CacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(paths.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("engine extism: compilation cache %s: %w", paths.CacheDir, err)
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
