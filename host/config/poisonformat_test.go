package config

import (
	"strings"
	"testing"
)

// TestPoisonFormatKey: an azure backend's poison_format is envelope or raw; any other value,
// or the key on another backend type, is refused naming it.
func TestPoisonFormatKey(t *testing.T) {
	parse := func(backend string) error {
		_, err := Parse([]byte("backends:\n  b: "+backend+"\ntenants:\n  acme:\n    bindings:\n      o: {backend: b, queue: orders, module: 'builtin:echo-go'}\n"), t.TempDir())
		return err
	}
	for _, f := range []string{"envelope", "raw"} {
		if err := parse("{type: azure, connection_string_env: X, poison_format: " + f + "}"); err != nil {
			t.Errorf("poison_format %s: %v", f, err)
		}
	}
	for _, tc := range []struct{ backend, want string }{
		{"{type: azure, connection_string_env: X, poison_format: functions}", `backends.b.poison_format: "functions" is not one of envelope, raw`},
		{"{type: local, poison_format: raw}", "backends.b.poison_format: applies to azure backends only"},
	} {
		if err := parse(tc.backend); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.backend, err, tc.want)
		}
	}
}
