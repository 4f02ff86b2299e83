package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
)

// TestHotReloadConfigMapSymlinkSwap: the config and module reached through a Kubernetes
// ConfigMap mount (file -> ..data/file, ..data -> ..<timestamp>) are reloaded when the
// kubelet swaps ..data to a new directory, twice in a row, with the default debounce.
func TestHotReloadConfigMapSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	mount := filepath.Join(dir, "config")
	if err := os.Mkdir(mount, 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := func(tenants string) string {
		return fmt.Sprintf("data_dir: %s\ncache_dir: %s\nadmin: {addr: \"off\"}\nbackends:\n  mem: {type: memory}\ntenants:\n%s",
			filepath.Join(dir, "data"), cacheDir, tenants)
	}
	// publish writes a new timestamped directory and swaps ..data to it atomically, as the
	// kubelet's atomic writer does, then deletes the old directory unless keepOld (then the
	// rename of ..data is the only event).
	gen := 0
	publish := func(tenants, version string, keepOld bool) {
		t.Helper()
		gen++
		ts := fmt.Sprintf("..2026_11_22_10_00_%02d.%d", gen, gen)
		d := filepath.Join(mount, ts)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "wqhost.yaml"), []byte(yaml(tenants)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "handler.wasm"), readFixture(t, version), 0o644); err != nil {
			t.Fatal(err)
		}
		old, _ := os.Readlink(filepath.Join(mount, "..data"))
		if err := os.Symlink(ts, filepath.Join(mount, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(mount, "..data_tmp"), filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
		if old != "" && !keepOld {
			if err := os.RemoveAll(filepath.Join(mount, old)); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := "  a:\n" + tenantBinding("handler.wasm", "")
	publish(a, "v1", false)
	for _, f := range []string{"wqhost.yaml", "handler.wasm"} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(mount, f)); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := source.LoadConfig(config.LoadOptions{File: filepath.Join(mount, "wqhost.yaml"), Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if h.debounce != defaultDebounce {
		t.Fatalf("debounce %v, want the default %v", h.debounce, defaultDebounce)
	}
	stop := run(t, h)
	// Run sets run.ctx after the watcher has added its watches: a swap before would be missed.
	eventually(t, "Run to start watching", func() bool {
		h.run.mu.Lock()
		defer h.run.mu.Unlock()
		return h.run.ctx != nil
	})
	aBefore := h.bindingNamed("a", "w")

	// Swap 1: tenant b added; the old directory stays.
	publish(a+"  b:\n"+tenantBinding("handler.wasm", ""), "v1", true)
	eventually(t, "the tenant added by the swapped ConfigMap", func() bool { return h.tenantNamed("b") != nil })
	send(t, h, "b", "in", "x")
	eventually(t, "b's output", func() bool { return depth(t, h, "b", "out") == 1 })
	if h.bindingNamed("a", "w") != aBefore {
		t.Error("a's binding restarted by a swap that did not change it")
	}

	// Swap 2: the module changes (v2) and b goes; the watcher follows the new target.
	publish(a, "v2", false)
	v2 := digestOf(readFixture(t, "v2"))
	eventually(t, "the second swap applied", func() bool {
		return h.tenantNamed("b") == nil && bindingStatus(t, h, "a", "w").ModuleDigest == v2
	})
	send(t, h, "a", "in", "y")
	eventually(t, "a's output", func() bool { return depth(t, h, "a", "out") == 1 })
	if got := string(drainBodies(t, h, "a", "out")[0].Body); got != "v2:y" {
		t.Errorf("a's output %q, want v2:y", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
