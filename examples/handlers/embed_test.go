package handlers_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wqhost/wqhost/examples/handlers"
)

// TestBuiltinsAreTheCommittedModules: every committed <name>/<name>.wasm is a builtin of that
// name with the same bytes, and nothing else is.
func TestBuiltinsAreTheCommittedModules(t *testing.T) {
	files, err := filepath.Glob("*/*.wasm")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		if filepath.Base(f) != name+".wasm" {
			continue
		}
		want = append(want, name)
		disk, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		embedded, err := handlers.Module(name)
		if err != nil {
			t.Fatalf("builtin %s: %v", name, err)
		}
		if !bytes.Equal(embedded, disk) {
			t.Errorf("builtin %s differs from %s", name, f)
		}
	}
	slices.Sort(want)
	if got := handlers.Names(); !slices.Equal(got, want) {
		t.Errorf("builtins %v, want the committed modules %v", got, want)
	}
	for _, name := range []string{"count-vowels-perchar-go", "count-vowels-perchar-tinygo"} {
		if !slices.Contains(handlers.Names(), name) {
			t.Errorf("builtin %s missing", name)
		}
	}
}
