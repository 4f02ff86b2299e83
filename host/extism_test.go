package host

import (
	"context"
	"strings"
	"testing"
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
