package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReadmeTour follows README.md's tour in a temp dir outside the checkout: wqhost new,
// build.sh (offline), validate, call, run with the written wqhost.yaml, send 100 messages,
// status, and peek at the outputs. Each command it runs must appear in the README as written.
func TestReadmeTour(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{
		"go install ./cmd/wqhost", "wqhost new go my-handler", "cd my-handler", "./build.sh",
		"wqhost validate handler.wasm", "wqhost call handler.wasm --body world",
		"wqhost run --config wqhost.yaml &", "wqhost send --queue jobs --count 1000 'job {n}'",
		"wqhost status", "wqhost peek --queue jobs-done",
	} {
		if !strings.Contains(string(readme), cmd) {
			t.Errorf("README.md's tour no longer says %q: update this test with it", cmd)
		}
	}

	parent := t.TempDir()
	wq(t, parent, "new", "go", "my-handler").expect(t, 0, "new", "wrote a go handler project")
	dir := filepath.Join(parent, "my-handler")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "./build.sh")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("./build.sh: %v\n%s", err, out)
	}
	wq(t, dir, "validate", "handler.wasm").expect(t, 0, "validate", "ok, fits abi wqhost/v1")
	wq(t, dir, "call", "handler.wasm", "--body", "world").expect(t, 0, "call", "-> out: hello, world")

	h := startHost(t, dir, "--config", "wqhost.yaml")
	wq(t, dir, "send", "--queue", "jobs", "--count", "100", "job {n}").expect(t, 0, "send")
	waitFor(t, 2*time.Minute, "100 outputs in jobs-done", func() bool {
		r := wq(t, dir, "peek", "--queue", "jobs-done", "--limit", "0", "--json")
		return r.code == 0 && strings.Count(r.stdout, "\n") == 100
	})
	wq(t, dir, "peek", "--queue", "jobs-done", "--limit", "1").expect(t, 0, "peek", "hello, job ", "1 message shown from jobs-done (not consumed)")
	wq(t, dir, "status", "--admin", h.addr).expect(t, 0, "status", "greet", "jobs")
}
