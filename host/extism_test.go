package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/examples/handlers"
	"github.com/wqhost/wqhost/internal/wasmtest"
)

// TestExtismPluginBinding runs an Extism plugin (the extism-vowels-tinygo example) as a
// binding, its ABI detected from its imports and its function named by function: — its output
// reaches the output queue, and a message it fails (error_set) is retried, then
// dead-lettered with the plugin's reason.
func TestExtismPluginBinding(t *testing.T) {
	h, cfg := newHost(t, `
  acme:
    bindings:
      vowels:
        queue: words
        output: counts
        module: builtin:extism-vowels-tinygo
        function: count_vowels
        config: {vowels: "eo"}
`+fast)
	stop := run(t, h)
	send(t, h, "acme", "words", "Hello, World!", "\xff\xfe")
	eventually(t, "the output", func() bool { return depth(t, h, "acme", "counts") == 1 })
	eventually(t, "the dead letter", func() bool { return depth(t, h, "acme", "words-poison") == 1 })
	if got := bodiesOf(t, h, "acme", "counts"); len(got) != 1 || got[0] != `{"count":3,"total":3,"vowels":"eo"}` {
		t.Fatalf("outputs %q, want the plugin's count of e and o", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dls, err := ListDeadLetters(context.Background(), cfg, "acme", "words", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].DequeueCount != 3 || !strings.Contains(dls[0].Reason, "extism plugin failed (code 1): input is not UTF-8 text") {
		t.Fatalf("dead letters %+v, want one after 3 attempts with the plugin's reason", dls)
	}
}

// TestExtismPluginHotReload: a changed plugin file is swapped in like a wqhost/v1 module:
// the next message runs the new version, nothing is lost.
func TestExtismPluginHotReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plugin.wasm")
	first, err := handlers.Module("extism-vowels-tinygo")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, first, 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ := newHost(t, fmt.Sprintf(`
  acme:
    bindings:
      p:
        queue: in
        output: out
        module: %q
        abi: extism
        function: count_vowels
`, path))
	run(t, h)
	send(t, h, "acme", "in", "aaa")
	eventually(t, "the first version's output", func() bool { return depth(t, h, "acme", "out") == 1 })
	// The second version: count_vowels echoes its input (input_offset, input_length, output_set).
	echo := wasmtest.Spec{Imports: []wasmtest.Import{
		{Module: "extism:host/env", Name: "input_offset", Results: []byte{wasmtest.I64}},
		{Module: "extism:host/env", Name: "input_length", Results: []byte{wasmtest.I64}},
		{Module: "extism:host/env", Name: "output_set", Params: []byte{wasmtest.I64, wasmtest.I64}},
	}, Funcs: []wasmtest.Func{{Export: "count_vowels", Results: []byte{wasmtest.I32},
		Body: append(append(append(wasmtest.Call(0), wasmtest.Call(1)...), wasmtest.Call(2)...), wasmtest.I32Const(0)...)}}}.Bytes()
	if err := os.WriteFile(path, echo, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := h.ReloadAll(context.Background())
	if err != nil || len(res.Bindings) != 1 || res.Bindings[0].Result != ReloadSwapped {
		t.Fatalf("reload: %v %+v, want the binding swapped", err, res)
	}
	send(t, h, "acme", "in", "zzz")
	eventually(t, "the second version's output", func() bool { return depth(t, h, "acme", "out") == 2 })
	if got := bodiesOf(t, h, "acme", "out"); len(got) != 2 || got[0] != `{"count":3,"total":3,"vowels":"aeiouAEIOU"}` || got[1] != "zzz" {
		t.Fatalf("outputs %q, want the first version's count then the second's echo", got)
	}
}
