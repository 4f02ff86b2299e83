package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPeekReadsOnlyWhatItPrints: peek reads each body only as far as it prints it (SQL
// substr on the local store) and prints rows as it reads them, so its memory does not grow
// with the bodies' sizes or their number. It took 408 MB for 20 bodies of 10 MB and 240 MB
// for --limit 0 of 400k messages, loading every whole body to print 120 characters.
func TestPeekReadsOnlyWhatItPrints(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 400 MB of messages")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "wqhost.yaml")
	yaml := fmt.Sprintf("data_dir: %s\nadmin: {addr: \"off\"}\ntenants:\n  default:\n    limits: {max_message_bytes: 16MiB}\n    bindings:\n      b: {queue: jobs, module: 'builtin:echo-go'}\n", filepath.Join(dir, "data"))
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, bytes.Repeat([]byte("0123456789"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	wq(t, dir, "send", "--config", cfg, "--queue", "big", "--count", "20", "--file", big).expect(t, 0, "send 20 × 10 MB")
	wq(t, dir, "send", "--config", cfg, "--queue", "many", "--count", "50000", strings.Repeat("x", 4<<10)+"{n}").expect(t, 0, "send 50000 × 4 KiB")
	const bound = 120 << 20
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"20 bodies of 10 MB", []string{"peek", "--config", cfg, "--queue", "big"}, []string{"20 messages shown from big", "… (10485760 bytes)"}},
		{"20 bodies of 10 MB, --json", []string{"peek", "--config", cfg, "--queue", "big", "--json"}, []string{`"size":10485760`, `"truncated":true`}},
		{"--limit 0 of 50000 × 4 KiB", []string{"peek", "--config", cfg, "--queue", "many", "--limit", "0"}, []string{"50000 messages shown from many"}},
	} {
		r, rss := peakRSS(t, dir, c.args...)
		r.expect(t, 0, c.name, c.want...)
		t.Logf("peek %s: peak RSS %d MiB", c.name, rss>>20)
		if rss > bound {
			t.Errorf("peek %s: peak RSS %d MiB, want below %d MiB (it read bodies it does not print)", c.name, rss>>20, bound>>20)
		}
		if c.args[len(c.args)-1] == "--json" {
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				var m peekJSON
				if err := json.Unmarshal([]byte(line), &m); err != nil || m.Body == nil || len(*m.Body) != peekJSONBytes {
					t.Fatalf("peek --json line %.200s: %v: want a %d-byte body", line, err, peekJSONBytes)
				}
			}
		}
	}
}

// TestPeekJSONEscapesLikePoisonList: peek --json escapes the C1 controls and bidi overrides
// encoding/json leaves raw (U+009B starts a CSI on some terminals, U+202E reverses the
// text), as poison list --json does.
func TestPeekJSONEscapesLikePoisonList(t *testing.T) {
	dir := t.TempDir()
	wq(t, dir, "send", "--queue", "jobs", "safe\u202etxt.exe \u009b31m").expect(t, 0, "send")
	r := wq(t, dir, "peek", "--queue", "jobs", "--json")
	r.expect(t, 0, "peek --json", `\u202e`, `\u009b`)
	if strings.ContainsAny(r.stdout, "\u202e\u009b") {
		t.Errorf("peek --json printed a raw U+202E or U+009B:\n%q", r.stdout)
	}
}

// TestSendFileTooLargeNamesItsSize: send --file of a 10 MB file above the tenant's 1 MiB
// limit is refused naming the file, its real size and the limit (it said 1048577, the bytes
// it had read).
func TestSendFileTooLargeNamesItsSize(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, make([]byte, 10<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	r := wq(t, dir, "send", "--queue", "jobs", "--file", big)
	r.expect(t, 2, "send --file of 10 MiB", big, "10485760 bytes (10MiB)", "max_message_bytes 1MiB")
	if strings.Contains(r.stderr, "1048577") {
		t.Errorf("the refusal still reports the bytes read: %s", r.stderr)
	}
}
