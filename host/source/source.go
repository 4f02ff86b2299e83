// Package source is where the host's files come from: it reads the config file, resolves
// module references (builtin:<name> to an embedded example handler, anything else to a
// .wasm file against the config's directory) and checks plugin binaries. host/config only
// parses, validates and compares; every reader of a config file, module or plugin in the
// host and in cmd/wqhost goes through here, so the file checks (a regular file, at most
// max_module_bytes, a plugin executable) are made in one place.
package source

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wqhost/wqhost/examples/handlers"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/internal/safefile"
)

// MaxConfigBytes caps the config file: far above a config of max_bindings bindings, and it
// keeps --config /dev/zero from reading until memory runs out (a FIFO or a directory is
// refused the same way, without blocking).
const MaxConfigBytes = 64 << 20

// LoadConfig reads the config file opts.File names (or, with none, takes the embedded
// default, relative paths then resolving against the working directory) and loads it with
// config.Load, Check added to opts.Checks: a missing module or a bad plugin path is reported
// with the config's other problems, in one *config.Error.
func LoadConfig(opts config.LoadOptions) (*config.Config, error) {
	if opts.File == "" {
		if opts.BaseDir == "" {
			wd, err := os.Getwd()
			if err != nil {
				return nil, fmt.Errorf("config: working directory: %w", err)
			}
			opts.BaseDir = wd
		}
	} else {
		data, err := safefile.Read(opts.File, MaxConfigBytes)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		abs, err := filepath.Abs(opts.File)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", opts.File, err)
		}
		opts.Data, opts.BaseDir = data, filepath.Dir(abs)
	}
	opts.Checks = append(slices.Clip(opts.Checks), Check)
	return config.Load(opts)
}

// Module returns the bytes of a module reference of c: an embedded builtin:<name>, or a
// file (config.ModulePath) that must be a regular file of at most max_module_bytes.
func Module(c *config.Config, ref string) ([]byte, error) {
	if name, ok := strings.CutPrefix(ref, config.BuiltinPrefix); ok {
		return handlers.Module(name)
	}
	b, err := safefile.Read(c.ModulePath(ref), moduleCap(c))
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", ref, err)
	}
	return b, nil
}

// ReadFile returns the bytes of a module or plugin file named outside a config (wqhost call,
// a plugin's digest): a regular file of at most the default max_module_bytes, so a FIFO or
// device named by mistake is refused rather than read forever.
func ReadFile(path string) ([]byte, error) {
	return safefile.Read(path, safefile.DefaultMaxBytes)
}

// CheckFile returns why path cannot be read by ReadFile, or nil, without opening it.
func CheckFile(path string) error {
	return safefile.Check(path, safefile.DefaultMaxBytes)
}

// moduleCap is max_module_bytes, or the default for a Config not built by config.Load or
// config.Parse.
func moduleCap(c *config.Config) int64 {
	if c.MaxModuleBytes <= 0 {
		return safefile.DefaultMaxBytes
	}
	return int64(c.MaxModuleBytes)
}

// problem is one finding at a key path. Its text is the config report's wording; it unwraps
// to the file system's error, so errors.Is(err, fs.ErrNotExist) holds for a missing file.
type problem struct {
	msg string
	err error
}

func (p *problem) Error() string { return p.msg }
func (p *problem) Unwrap() error { return p.err }

// Check is a config.Check: every binding's module reference and plugin binaries, looked up
// as the host will load them, one error per problem naming its key path
// (tenants.<t>.bindings.<b>.module, ….backoff.plugin, ….scaler.plugin, ….poison.plugin).
func Check(c *config.Config) []error {
	var errs []error
	fail := func(path string, err error, format string, args ...any) {
		errs = append(errs, &problem{msg: path + ": " + fmt.Sprintf(format, args...), err: err})
	}
	for _, tn := range slices.Sorted(maps.Keys(c.Tenants)) {
		t := c.Tenants[tn]
		for _, bn := range slices.Sorted(maps.Keys(t.Bindings)) {
			b := t.Bindings[bn]
			bp := "tenants." + tn + ".bindings." + bn
			checkModule(c, fail, bp+".module", t, b.Module)
			checkPlugin(c, fail, bp+".backoff.plugin", b.Backoff.Plugin)
			checkPlugin(c, fail, bp+".scaler.plugin", b.Scaler.Plugin)
			checkPlugin(c, fail, bp+".poison.plugin", b.Poison.Plugin)
		}
	}
	return errs
}

type failFunc func(path string, err error, format string, args ...any)

func checkModule(c *config.Config, fail failFunc, path string, t config.Tenant, ref string) {
	if ref == "" {
		fail(path, nil, "required: a .wasm file path or builtin:<name> (builtin: %s)", strings.Join(handlers.Names(), ", "))
		return
	}
	if name, ok := strings.CutPrefix(ref, config.BuiltinPrefix); ok {
		if _, err := handlers.Module(name); err != nil {
			fail(path, err, "%v", err)
		}
		return
	}
	if !c.InModuleDir(t, ref) {
		return // config reports it; a file outside the tenant's module_dir is not looked at
	}
	p := c.ModulePath(ref)
	switch err := safefile.Check(p, moduleCap(c)); {
	case errors.Is(err, safefile.ErrTooLarge):
		fail(path, err, "module %v; max_module_bytes is the cap", err)
	case errors.Is(err, safefile.ErrNotRegular):
		fail(path, err, "module %v; want a regular .wasm file", err)
	case err != nil:
		fail(path, err, "module file %s: %v", p, errText(err))
	}
}

func checkPlugin(c *config.Config, fail failFunc, path, plugin string) {
	if plugin == "" {
		return
	}
	bin := c.PluginPath(plugin)
	fi, err := os.Stat(bin)
	cerr := safefile.Check(bin, moduleCap(c))
	switch {
	case err != nil:
		fail(path, err, "plugin binary %s: %v", bin, errText(err))
	case errors.Is(cerr, safefile.ErrTooLarge):
		fail(path, cerr, "plugin %v; max_module_bytes is the cap", cerr)
	case cerr != nil:
		fail(path, cerr, "plugin %v; want a regular executable file", cerr)
	case fi.Mode().Perm()&0o111 == 0:
		fail(path, nil, "plugin %s is not executable (mode %v)", bin, fi.Mode().Perm())
	}
}

// errText is a file error without the path and operation the report already gives.
func errText(err error) string {
	switch {
	case os.IsNotExist(err):
		return "no such file"
	case os.IsPermission(err):
		return "permission denied"
	}
	return err.Error()
}
