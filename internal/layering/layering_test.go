package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/wqhost/wqhost"

// A rule constrains what the packages matched by from may depend on, directly or not. A
// pattern is a path relative to the module ("host/config"), or a full import path when its
// first element has a dot ("google.golang.org/grpc"); a trailing "/..." matches the path and
// everything below it.
type rule struct {
	why  string
	from []string
	// only, when not nil, lists every package of this module the matched ones may depend on.
	only []string
	// never lists packages (of this module or not) none of them may depend on.
	never []string
}

// heavy are the dependencies a package that only parses settings must not link.
var heavy = []string{
	"github.com/tetratelabs/wazero/...",
	"google.golang.org/grpc/...",
	"github.com/hashicorp/go-plugin/...",
	"modernc.org/sqlite/...",
	"github.com/Azure/azure-sdk-for-go/...",
	"github.com/nats-io/...",
	"github.com/prometheus/...",
}

var rules = []rule{
	{
		why:  "a backend imports only the contract (listener/queue): not the listener, another backend, host/ or runtime/",
		from: []string{"listener/memory", "listener/local", "listener/azure", "listener/nats", "listener/sharded"},
		only: []string{"listener/queue", "internal/..."},
	},
	{
		why:  "the contract (listener/queue) is the bottom of the listener: it imports only internal helpers",
		from: []string{"listener/queue"},
		only: []string{"internal/..."},
	},
	{
		why:  "the outcome (listener/outcome) imports nothing of wqhost's",
		from: []string{"listener/outcome"},
		only: []string{},
	},
	{
		why:   "runtime and listener never meet: the runtime knows no queue",
		from:  []string{"runtime/..."},
		never: []string{"listener/..."},
	},
	{
		why:   "runtime and listener never meet: the listener knows no WebAssembly",
		from:  []string{"listener/..."},
		never: []string{"runtime/...", "github.com/tetratelabs/wazero/..."},
	},
	{
		why:   "plugins implement the listener's policies and know no WebAssembly",
		from:  []string{"plugins/..."},
		never: []string{"runtime/...", "github.com/tetratelabs/wazero/..."},
	},
	{
		why:   "host/config is a leaf: shared defaults in internal/defaults, the contract's limits, netpolicy's rule parser, no heavy dependency",
		from:  []string{"host/config"},
		only:  []string{"internal/defaults", "internal/wait", "listener/queue", "netpolicy"},
		never: heavy,
	},
	{
		why:   "no arrow runs up: the parts the host wires never import host/ or cmd/",
		from:  []string{"runtime/...", "listener/...", "plugins/...", "netpolicy/...", "internal/..."},
		never: []string{"host/...", "cmd/..."},
	},
}

func TestLayering(t *testing.T) {
	g := loadGraph(t)
	for _, r := range rules {
		var matched []string
		for _, p := range g.ours {
			if matchAny(r.from, p) {
				matched = append(matched, p)
			}
		}
		if len(matched) == 0 {
			t.Errorf("rule %q matches no package of %s: the table is out of date", r.why, module)
			continue
		}
		for _, p := range matched {
			bad := g.violations(p, r)
			for _, v := range bad {
				chain := g.path(p, v)
				// Name only the first forbidden package on each chain: what lies below it
				// goes with it.
				if slices.ContainsFunc(chain[1:len(chain)-1], func(c string) bool { return slices.Contains(bad, c) }) {
					continue
				}
				t.Errorf("%s depends on %s (%s), which breaks the rule: %s", rel(p), rel(v), strings.Join(relAll(chain), " -> "), r.why)
			}
		}
	}
}

// graph is the import graph of this module's packages and everything they depend on.
type graph struct {
	imports map[string][]string
	ours    []string // this module's packages, sorted
}

func loadGraph(t *testing.T) *graph {
	t.Helper()
	// -e so that one package that does not build names itself instead of hiding the rest.
	cmd := exec.Command("go", "list", "-e", "-deps", "-json=ImportPath,Imports,Standard", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := &graph{imports: map[string][]string{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Standard   bool
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		g.imports[p.ImportPath] = p.Imports
		if p.ImportPath == module || strings.HasPrefix(p.ImportPath, module+"/") {
			g.ours = append(g.ours, p.ImportPath)
		}
	}
	slices.Sort(g.ours)
	if !slices.Contains(g.ours, module+"/host/config") {
		t.Fatalf("go list found no %s/host/config: not run inside the module?", module)
	}
	return g
}

// violations returns the dependencies of p, in a stable order, that rule r forbids.
func (g *graph) violations(p string, r rule) []string {
	var bad []string
	for _, d := range g.deps(p) {
		ours := strings.HasPrefix(d, module+"/")
		switch {
		case matchAny(r.never, d):
			bad = append(bad, d)
		case r.only != nil && ours && !matchAny(r.only, d):
			bad = append(bad, d)
		}
	}
	return bad
}

// deps returns every package p depends on, directly or not, sorted.
func (g *graph) deps(p string) []string {
	seen := map[string]bool{}
	stack := slices.Clone(g.imports[p])
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[d] {
			continue
		}
		seen[d] = true
		stack = append(stack, g.imports[d]...)
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// path returns a shortest import chain from p to d, so that a failure says which import to
// remove.
func (g *graph) path(p, d string) []string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n == d {
			var chain []string
			for ; n != ""; n = prev[n] {
				chain = append(chain, n)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, m := range g.imports[n] {
			if _, ok := prev[m]; !ok {
				prev[m] = n
				queue = append(queue, m)
			}
		}
	}
	return []string{p, "?", d}
}

func matchAny(patterns []string, importPath string) bool {
	for _, pat := range patterns {
		if match(pat, importPath) {
			return true
		}
	}
	return false
}

func match(pattern, importPath string) bool {
	if first, _, _ := strings.Cut(pattern, "/"); !strings.Contains(first, ".") {
		pattern = module + "/" + pattern
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return importPath == base || strings.HasPrefix(importPath, base+"/")
	}
	return importPath == pattern
}

func rel(importPath string) string {
	if r, ok := strings.CutPrefix(importPath, module+"/"); ok {
		return r
	}
	return importPath
}

func relAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = rel(p)
	}
	return out
}

// The matcher the rules rest on: a rule that matched nothing, or everything, would pass or
// fail for the wrong reason.
func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, importPath string
		want                bool
	}{
		{"listener/...", module + "/listener", true},
		{"listener/...", module + "/listener/local", true},
		{"listener/...", module + "/listenerx", false},
		{"listener", module + "/listener/local", false},
		{"host/config", module + "/host/config", true},
		{"google.golang.org/grpc/...", "google.golang.org/grpc/codes", true},
		{"google.golang.org/grpc/...", module + "/google.golang.org/grpc", false},
		{"runtime/...", "runtime", false},
		{"internal/...", "internal/poll", false},
	}
	for _, tt := range tests {
		if got := match(tt.pattern, tt.importPath); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pattern, tt.importPath, got, tt.want)
		}
	}
}
