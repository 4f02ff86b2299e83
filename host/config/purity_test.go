package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// host/config parses, validates and compares; it does no file I/O. Reading the config file,
// finding modules and checking plugin binaries is host/source's job. These are the only
// uses of packages that can reach the file system that the package's own files may make:
var (
	// allowedUses lists, per package, the only names config may use from it.
	allowedUses = map[string]map[string]bool{
		// The process environment, not files: WQHOST_… overrides (Load) and the check
		// that a secret's value_env is set (http.go).
		"os": {"Environ": true, "LookupEnv": true},
		// A constant: max_module_bytes defaults to the cap safefile applies.
		"github.com/wqhost/wqhost/internal/safefile": {"DefaultMaxBytes": true},
	}
	// deniedUses lists names of otherwise lexical packages that touch the file system.
	deniedUses = map[string]map[string]bool{
		"path/filepath": {"Abs": true, "EvalSymlinks": true, "Glob": true, "Walk": true, "WalkDir": true},
	}
	// deniedImports may not be imported at all.
	deniedImports = map[string]bool{
		"io/ioutil": true, "io/fs": true, "os/exec": true, "syscall": true,
		"github.com/wqhost/wqhost/examples/handlers": true,
	}
)

func TestConfigDoesNoFileIO(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		imported := map[string]string{} // local name -> import path
		for _, im := range f.Imports {
			p, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if deniedImports[p] {
				t.Errorf("%s imports %s", fset.Position(im.Pos()), p)
			}
			local := path.Base(p)
			if im.Name != nil {
				local = im.Name.Name
			}
			if local == "." && (allowedUses[p] != nil || deniedUses[p] != nil) {
				t.Errorf("%s dot-imports %s: its uses could not be checked", fset.Position(im.Pos()), p)
			}
			imported[local] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			p, ok := imported[id.Name]
			if !ok {
				return true
			}
			if allow, ok := allowedUses[p]; ok && !allow[sel.Sel.Name] {
				t.Errorf("%s uses %s.%s: host/config does no file I/O (host/source does)", fset.Position(sel.Pos()), p, sel.Sel.Name)
			}
			if deniedUses[p][sel.Sel.Name] {
				t.Errorf("%s uses %s.%s: host/config does no file I/O (host/source does)", fset.Position(sel.Pos()), p, sel.Sel.Name)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no Go files checked")
	}
}

// Nor does anything config imports bring in the example handlers (megabytes of embedded
// modules): resolving builtin: names is host/source's job.
func TestConfigDoesNotDependOnTheExampleHandlers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/wqhost/wqhost/examples/handlers" || dep == "github.com/wqhost/wqhost/host/source" {
			t.Errorf("host/config depends on %s", dep)
		}
	}
}

// A module file that does not exist is not config's finding: it never looks.
func TestParseDoesNotLookForModules(t *testing.T) {
	c, err := Parse([]byte("tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: missing.wasm, backoff: {plugin: ./missing}}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ModulePath(c.Tenants["acme"].Bindings["orders"].Module); filepath.Base(p) != "missing.wasm" {
		t.Fatalf("module path %q", p)
	}
}
