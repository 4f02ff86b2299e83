package main

import (
	"strings"
	"testing"
)

func TestCall(t *testing.T) {
	vowelsOut := `-> out: {"count":3,"total":3,"vowels":"aeiouAEIOU"}`
	for _, tc := range []struct {
		name  string
		args  []string
		code  int
		wants []string
	}{
		{"tinygo vowels", []string{"examples/handlers/count-vowels-tinygo/count-vowels-tinygo.wasm", "--body", "Hello, World"}, 0, []string{"status: ok", "outputs: 1", vowelsOut}},
		{"go vowels with config", []string{"examples/handlers/count-vowels-go/count-vowels-go.wasm", "--body", "xyz", "--config", "vowels=xy"}, 0, []string{`{"count":2,"total":2,"vowels":"xy"}`}},
		{"rust vowels", []string{"examples/handlers/count-vowels-rust/count-vowels-rust.wasm", "--body", "Hello, World"}, 0, []string{vowelsOut}},
		{"body from a file", []string{"examples/handlers/echo-tinygo/echo-tinygo.wasm", "--file", "examples/handlers/README.md", "--output", "copies"}, 0, []string{"-> copies: "}},
		{"reject with its reason", []string{"examples/handlers/billing-tinygo/billing-tinygo.wasm", "--body", `{"id":`}, 1, []string{"status: reject", "reason: billing: malformed transaction JSON", "outputs: 0"}},
		{"control characters escaped", []string{"examples/handlers/echo-go/echo-go.wasm", "--body", "a\x1b[2Jb"}, 0, []string{`-> out: a\x1b[2Jb`}},
		{"wasi-stdio", []string{"--abi", "wasi-stdio", "examples/handlers/upper-stdio/upper-stdio.wasm", "--body", "shout\n"}, 0, []string{"status: ok", `-> out: SHOUT\x0a`}},
		{"wrong abi", []string{"--abi", "wasi-stdio", "examples/handlers/billing-go/billing-go.wasm"}, 2, []string{"missing export _start"}},
		{"unknown meta", []string{"examples/handlers/echo-go/echo-go.wasm", "--meta", "colour=red"}, 2, []string{`--meta "colour": unknown key`}},
		{"body and file", []string{"examples/handlers/echo-go/echo-go.wasm", "--body", "x", "--file", "README.md"}, 2, []string{"give one of them"}},
		{"missing file", []string{"nope.wasm"}, 2, []string{"nope.wasm: no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := wq(t, repoRoot, append([]string{"call"}, tc.args...)...)
			r.expect(t, tc.code, "call", tc.wants...)
			// The host's own debug events (the compile child's timing) are not the guest's logs.
			if strings.Contains(r.stdout, "DEBUG runtime") {
				t.Errorf("call prints the runtime's debug events:\n%s", r.stdout)
			}
		})
	}
}
