// Package testcache gives tests one wazero compilation cache directory, so a module is
// compiled to machine code once and every test, and every test binary, after that loads it.
// Compiling the 2 MB Go-built fixtures dominates the test run time under -race, where the
// compiler itself is race-instrumented.
package testcache

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// EnvVar names the directory scripts/test.sh creates for one CI run and removes after it, so
// the run starts cold and leaves nothing behind.
const EnvVar = "WQHOST_TEST_CACHE_DIR"

// Dir returns the compilation cache directory tests should give the runtime (EngineConfig
// CacheDir, a host config's cache_dir, WQHOST_CACHE_DIR): $WQHOST_TEST_CACHE_DIR when set,
// otherwise wqhost-test-cache in the system temp directory, kept across runs so a developer's
// repeated go test stays fast. Sharing one directory between concurrent test processes is
// safe: wazero's file cache writes each entry to a temporary file and renames it into place,
// and checks an entry's wazero version when it loads it, recompiling on any mismatch.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Shared is Dir for a TestMain, which has no testing.TB: it creates the directory if needed
// and returns it, or an error naming it.
func Shared() (string, error) {
	dir := os.Getenv(EnvVar)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "wqhost-test-cache")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("test compilation cache %s: %w", dir, err)
	}
	return dir, nil
}
