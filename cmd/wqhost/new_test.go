package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
)

// toolchain finds the compiler a project kind needs; "" when it is not installed.
func toolchain(kind string) (env []string, missing string) {
	switch kind {
	case "tinygo", "extism":
		out, err := exec.Command("bash", filepath.Join(repoRoot, "scripts/install-tinygo.sh"), "--path").Output()
		if p := strings.TrimSpace(string(out)); err == nil && p != "" {
			return []string{"TINYGO=" + p}, ""
		}
		if p, err := exec.LookPath("tinygo"); err == nil {
			return []string{"TINYGO=" + p}, ""
		}
		return nil, "tinygo (run scripts/install-tinygo.sh)"
	case "rust":
		// Debian's toolchain by full path: a rustup one earlier on PATH may lack wasm32.
		if _, err := os.Stat("/usr/bin/cargo"); err != nil {
			return nil, "/usr/bin/cargo (run scripts/install-rust.sh)"
		}
		return []string{"CARGO=/usr/bin/cargo", "RUSTC=/usr/bin/rustc"}, ""
	}
	return nil, ""
}

// TestNewProjectsBuildAnywhere follows what a handler author does: `wqhost new` in a
// directory outside the checkout, build it with its own build.sh and no network (GOPROXY=off,
// cargo --offline, an empty CARGO_HOME), run it through `wqhost call`, and load its sample
// config.
func TestNewProjectsBuildAnywhere(t *testing.T) {
	for _, kind := range []string{"go", "tinygo", "rust", "extism"} {
		t.Run(kind, func(t *testing.T) {
			env, missing := toolchain(kind)
			if missing != "" {
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s is required in CI", missing)
				}
				t.Skipf("not installed: %s", missing)
			}
			dir := filepath.Join(t.TempDir(), "my-handler")
			if strings.HasPrefix(dir, repoRoot) {
				t.Fatalf("temp dir %s is inside the checkout", dir)
			}
			wq(t, "", "new", kind, dir).expect(t, 0, "new", "wrote a "+kind+" handler project")
			for _, f := range []string{"build.sh", "wqhost.yaml", "README.md"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Fatalf("project lacks %s: %v", f, err)
				}
			}

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			build := exec.CommandContext(ctx, "sh", "./build.sh")
			build.Dir = dir
			build.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=", "CARGO_HOME="+t.TempDir())
			build.Env = append(build.Env, env...)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("build.sh: %v\n%s", err, out)
			}

			if kind == "extism" {
				// An Extism plugin: no wqhost log call; an empty body fails (error_set).
				wq(t, dir, "call", "handler.wasm", "--body", "world").expect(t, 0, "call", "status: ok", "-> out: hello, world")
				wq(t, dir, "call", "handler.wasm", "--body", "world", "--config", "greeting=hi").expect(t, 0, "call with config",
					"-> out: hi, world")
				wq(t, dir, "call", "handler.wasm").expect(t, 1, "call with an empty body",
					"status: failed", "extism plugin failed (code 1): empty message")
			} else {
				wq(t, dir, "call", "handler.wasm", "--body", "world").expect(t, 0, "call",
					"status: ok", "-> out: hello, world", "greeting message call-1")
				wq(t, dir, "call", "handler.wasm", "--body", "world", "--config", "greeting=hi").expect(t, 0, "call with config",
					"-> out: hi, world")
				wq(t, dir, "call", "handler.wasm").expect(t, 1, "call with an empty body",
					"status: reject", "reason: empty message")
			}

			data, err := os.ReadFile(filepath.Join(dir, "wqhost.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := config.Parse(data, dir, source.Check); err != nil {
				t.Fatalf("sample wqhost.yaml does not load: %v", err)
			}
			wq(t, "", "new", kind, dir).expect(t, 2, "new into a non-empty dir", "is not empty")
		})
	}
	wq(t, "", "new", "cobol", t.TempDir()).expect(t, 2, "unknown kind", `kind "cobol": want go, tinygo, rust or extism`)
}
