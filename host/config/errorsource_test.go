package config

import (
	"strings"
	"testing"
)

// TestErrorNamesFileAndOverride: an invalid config names its file, and a problem with a key
// set by a WQHOST_… variable names that variable (the file does not hold the value quoted);
// a problem with a key from the file says nothing more.
func TestErrorNamesFileAndOverride(t *testing.T) {
	yaml := "tenants:\n  default:\n    bindings:\n      g: {queue: jobs, module: h.wasm, batch_size: 99}\n"
	_, err := Load(LoadOptions{File: "/etc/wqhost/wqhost.yaml", Data: []byte(yaml), BaseDir: t.TempDir(),
		Environ: []string{"WQHOST_TENANTS__DEFAULT__BINDINGS__G__MAX_WORKERS=lots"}})
	if err == nil {
		t.Fatal("Load accepted max_workers: lots and batch_size: 99")
	}
	msg := err.Error()
	for _, want := range []string{
		"invalid config /etc/wqhost/wqhost.yaml (2 problems):",
		`tenants.default.bindings.g.max_workers: expected an integer, got "lots" (set by environment variable WQHOST_TENANTS__DEFAULT__BINDINGS__G__MAX_WORKERS)`,
		"tenants.default.bindings.g.batch_size: 99 is above the maximum 32\n",
	} {
		if !strings.Contains(msg+"\n", want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}
