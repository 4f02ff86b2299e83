// Package handlers embeds the committed example handler modules so that the wqhost binary can
// run them without any file on disk: a config refers to one as "builtin:<name>", e.g.
// "builtin:billing-go" is billing-go/billing-go.wasm.
package handlers

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// FS holds every committed <name>/<name>.wasm.
//
//go:embed */*.wasm
var FS embed.FS

// ExtismPDK is the small Extism PDK for TinyGo of the extism-vowels-tinygo example (its
// extism:host/env imports and helpers); `wqhost new extism` writes it into new projects.
//
//go:embed extism-vowels-tinygo/pdk_wasip1.go
var ExtismPDK string

// Names lists the embedded modules by name, sorted.
func Names() []string {
	ents, _ := fs.ReadDir(FS, ".")
	var names []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, err := fs.Stat(FS, e.Name()+"/"+e.Name()+".wasm"); err == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// Module returns the bytes of the embedded module name (e.g. "billing-go").
func Module(name string) ([]byte, error) {
	if name == "" || strings.ContainsAny(name, "/\\.") {
		return nil, fmt.Errorf("builtin module %q: not a module name (known: %s)", name, strings.Join(Names(), ", "))
	}
	b, err := FS.ReadFile(name + "/" + name + ".wasm")
	if err != nil {
		return nil, fmt.Errorf("builtin module %q: unknown (known: %s)", name, strings.Join(Names(), ", "))
	}
	return b, nil
}
