package config

import (
	"strings"
	"testing"
	"time"
)

// TestShutdownGraceKey: shutdown.grace defaults to the listener's 30s, takes a duration and
// refuses one that is not above 0 or longer than an hour, naming the key.
func TestShutdownGraceKey(t *testing.T) {
	parse := func(top string) (*Config, error) {
		return Parse([]byte(top+"tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n"), t.TempDir())
	}
	c, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Shutdown.Grace != 30*time.Second {
		t.Errorf("default shutdown.grace = %s, want the documented 30s", c.Shutdown.Grace)
	}
	if c, err = parse("shutdown: {grace: 2m}\n"); err != nil || c.Shutdown.Grace != 2*time.Minute {
		t.Errorf("shutdown.grace 2m = %v, %v", c, err)
	}
	for _, tc := range []struct{ top, want string }{
		{"shutdown: {grace: 0s}\n", "shutdown.grace: 0s must be above 0 and at most 1h0m0s"},
		{"shutdown: {grace: -1s}\n", "shutdown.grace: -1s must be above 0"},
		{"shutdown: {grace: 2h}\n", "shutdown.grace: 2h0m0s must be above 0 and at most 1h0m0s"},
		{"shutdown: {grace: soon}\n", "shutdown.grace"},
		{"shutdown: {grcae: 1s}\n", "shutdown.grcae"},
	} {
		if _, err := parse(tc.top); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.top, err, tc.want)
		}
	}
}
