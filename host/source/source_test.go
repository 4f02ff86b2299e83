package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wqhost/wqhost/host/config"
)

func write(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// binding wraps a binding body (indented 8 spaces) in a minimal valid config.
func binding(body string) string {
	return "tenants:\n  acme:\n    bindings:\n      orders:\n        queue: orders\n        module: builtin:echo-go\n" + body
}

// The module and plugin problems host/config reported at load before it stopped reading
// files: the same key paths and words, in the same one report as the config's own problems.
func TestBadModulesAndPlugins(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "mods/ok.wasm", "\x00asm", 0o644)
	write(t, dir, "big.wasm", strings.Repeat("x", 2048), 0o644)
	write(t, dir, "notexec", "#!/bin/sh\n", 0o644)
	write(t, dir, "bigplugin", strings.Repeat("x", 2048), 0o755)
	if err := os.Mkdir(filepath.Join(dir, "adir.wasm"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, yaml string
		want       []string // each must appear; the number of problems must match
	}{
		{"missing module file", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: missing.wasm}\n",
			[]string{"tenants.acme.bindings.orders.module: module file " + filepath.Join(dir, "missing.wasm") + ": no such file"}},
		{"unknown builtin module", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: 'builtin:nope'}\n",
			[]string{`tenants.acme.bindings.orders.module: builtin module "nope": unknown (known: billing-go, `}},
		{"no module", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders}\n",
			[]string{"tenants.acme.bindings.orders.module: required"}},
		{"module above max_module_bytes", "max_module_bytes: 1KiB\ntenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: big.wasm}\n",
			[]string{"tenants.acme.bindings.orders.module: module " + filepath.Join(dir, "big.wasm") + " is 2048 bytes, above the cap of 1024: file too large; max_module_bytes is the cap"}},
		{"module is a directory", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: adir.wasm}\n",
			[]string{"tenants.acme.bindings.orders.module: module " + filepath.Join(dir, "adir.wasm") + " is a directory"}},
		{"module is a FIFO", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: fifo.wasm}\n",
			[]string{"tenants.acme.bindings.orders.module: module " + filepath.Join(dir, "fifo.wasm") + " is a FIFO"}},
		// Outside module_dir is config's finding; the file is not looked at, so a missing
		// one adds nothing.
		{"missing module outside module_dir", "tenants:\n  acme:\n    module_dir: mods\n    bindings:\n      orders: {queue: orders, module: gone.wasm}\n",
			[]string{`tenants.acme.bindings.orders.module: "gone.wasm" is outside the tenant's module_dir mods`}},
		{"missing plugin binary", binding("        scaler: {plugin: ./no-such-plugin}\n"),
			[]string{"tenants.acme.bindings.orders.scaler.plugin: plugin binary " + filepath.Join(dir, "no-such-plugin") + ": no such file"}},
		{"plugin not executable", binding("        poison: {plugin: notexec}\n"),
			[]string{"tenants.acme.bindings.orders.poison.plugin: plugin " + filepath.Join(dir, "notexec") + " is not executable"}},
		{"plugin above max_module_bytes", "max_module_bytes: 1KiB\n" + binding("        backoff: {plugin: bigplugin}\n"),
			[]string{"tenants.acme.bindings.orders.backoff.plugin: plugin " + filepath.Join(dir, "bigplugin") + " is 2048 bytes, above the cap of 1024: file too large; max_module_bytes is the cap"}},
		{"plugin is a directory", binding("        scaler: {plugin: mods}\n"),
			[]string{"tenants.acme.bindings.orders.scaler.plugin: plugin " + filepath.Join(dir, "mods") + " is a directory"}},
		// Type errors do not hide range errors or a missing module: one report, not rounds.
		{"type, range and module problems in one report", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: missing.wasm, batch_size: lots, max_workers: 2000, visibility_timeout: soon}\n",
			[]string{`batch_size: expected an integer, got "lots"`, `visibility_timeout: expected a duration`, "max_workers: 2000 is outside 1..1024", "module: module file " + filepath.Join(dir, "missing.wasm") + ": no such file"}},
		{"a module reference that does not decode is one problem", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: [a, b]}\n",
			[]string{"tenants.acme.bindings.orders.module: expected a string"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), dir, Check)
			if err == nil {
				t.Fatal("config accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("%T, want *config.Error: %v", err, err)
			}
			if len(ce.Problems) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%v", len(ce.Problems), len(tc.want), err)
			}
		})
	}
}

func TestMissingModuleIsNotExist(t *testing.T) {
	_, err := config.Parse([]byte(binding("")[:len(binding(""))-len("builtin:echo-go\n")]+"missing.wasm\n"), t.TempDir(), Check)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("errors.Is(err, fs.ErrNotExist) = false: %v", err)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig(config.LoadOptions{File: filepath.Join(t.TempDir(), "nope.yaml"), Environ: []string{}})
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("err = %v", err)
	}
}

// A config file whose keys are wrong is refused naming the file as well as the key, with one
// problem or several: a user running several configs must know which one to edit.
func TestLoadConfigErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"one problem", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go', max_workers: lots}\n",
			": tenants.acme.bindings.orders.max_workers: expected an integer"},
		{"two problems", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go', max_workers: lots, visibility_timeout: -5s}\n",
			" (2 problems):\n"},
	} {
		f := write(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.yaml, 0o644)
		_, err := LoadConfig(config.LoadOptions{File: f, Environ: []string{}})
		var ce *config.Error
		if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), "invalid config "+f+tc.want[:1]) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want a *config.Error starting %q and saying %q", tc.name, err, "invalid config "+f, tc.want)
		}
	}
}

// A config path that is not a regular file is refused naming it, without blocking on a FIFO
// or reading /dev/zero until memory runs out.
func TestLoadConfigNotARegularFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "c.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := write(t, t.TempDir(), "big.yaml", "", 0o644)
	if err := os.Truncate(big, MaxConfigBytes+1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, fifo + " is a FIFO (named pipe)"},
		{"/dev/zero", "/dev/zero is a character device"},
		{t.TempDir(), "is a directory"},
		{big, big + " is 67108865 bytes, above the cap of 67108864: file too large"},
	} {
		_, err := LoadConfig(config.LoadOptions{File: tc.path, Environ: []string{}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadConfig(%s): err = %v, want it to say %q", tc.path, err, tc.want)
		}
		if tc.path == big && strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("LoadConfig(%s): err = %v: a large regular file is called not a regular file", tc.path, err)
		}
	}
}

// LoadConfig resolves relative paths against the file's directory, checks modules, and
// keeps the file for a reload.
func TestLoadConfigFile(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "mods/h.wasm", "\x00asm", 0o644)
	f := write(t, dir, "c.yaml", "tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: mods/h.wasm}\n", 0o644)
	c, err := LoadConfig(config.LoadOptions{File: f, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseDir != dir || c.File != f {
		t.Errorf("base dir %q, file %q; want %q, %q", c.BaseDir, c.File, dir, f)
	}
	b, err := Module(c, c.Tenants["acme"].Bindings["orders"].Module)
	if err != nil || string(b) != "\x00asm" {
		t.Fatalf("module = %q, %v", b, err)
	}
	if err := os.Remove(filepath.Join(dir, "mods/h.wasm")); err != nil {
		t.Fatal(err)
	}
	if _, err := Module(c, "mods/h.wasm"); err == nil || !strings.HasPrefix(err.Error(), "module mods/h.wasm: ") {
		t.Fatalf("module removed: err = %v", err)
	}
	_, err = LoadConfig(config.LoadOptions{File: f, Environ: []string{}})
	if err == nil || !strings.Contains(err.Error(), "tenants.acme.bindings.orders.module: module file "+filepath.Join(dir, "mods/h.wasm")+": no such file") {
		t.Fatalf("module removed: load err = %v", err)
	}
}

func TestEmbeddedDefaultModuleLoads(t *testing.T) {
	c, err := LoadConfig(config.LoadOptions{Environ: []string{"WQHOST_DATA_DIR=/tmp/wq"}})
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseDir != wd {
		t.Errorf("base dir %q, want the working directory %q", c.BaseDir, wd)
	}
	b, err := c.Binding(config.DefaultTenant, "billing")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Module(c, b.Module); err != nil {
		t.Fatalf("embedded module: %v", err)
	}
}

// The repository's example configs name modules that exist (files built and committed,
// builtin: names known).
func TestExampleConfigsResolve(t *testing.T) {
	t.Setenv("HOOKS_TOKEN", "Bearer demo")
	for _, f := range []string{"../../examples/wqhost.yaml", "../../examples/handlers/webhook-delivery-go/wqhost.yaml"} {
		if _, err := LoadConfig(config.LoadOptions{File: f, Environ: []string{}}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
