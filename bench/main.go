// Command wqbench measures wqhost against the alternatives a user would otherwise pick:
// Extism's Go SDK, a wazero host that instantiates per message, plain Go (the floor), and, on
// the queue side, a naive receive-1 loop and a fixed 1-second poller. See docs/benchmarks.md.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func defaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	d = filepath.Join(d, "wqhost-bench", "wazero")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("compilation cache %s: %w", d, err)
	}
	return d, nil
}

func main() {}
