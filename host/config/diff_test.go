package config

import (
	"slices"
	"testing"
)

// TestDiff: Diff names each changed key as the file writes it, compares blocks key by key
// and the rest whole, sees the decoded values (the same value written another way, or a
// default written out, is no change) and leaves out the keys skipped and those below them.
func TestDiff(t *testing.T) {
	const orders = "    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n"
	parse := func(t *testing.T, yaml string) *Config {
		t.Helper()
		c, err := Parse([]byte(yaml), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Run("tenant", func(t *testing.T) {
		for _, tc := range []struct {
			name, a, b string
			want       []string
		}{
			{"unchanged", "", "", nil},
			{"written another way", "    limits: {timeout: 30s, memory: 128MiB}\n", "    limits: {timeout: 30000ms, memory: 134217728}\n", nil},
			{"a default written out", "", "    weight: 1\n", nil},
			{"one setting", "", "    weight: 3\n", []string{"weight"}},
			{"limits key by key, in order", "", "    token_env: T\n    limits: {timeout: 5s, memory: 64MiB}\n",
				[]string{"limits.memory", "limits.timeout", "token_env"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := parse(t, "tenants:\n  acme:\n"+tc.a+orders).Tenants["acme"]
				b := parse(t, "tenants:\n  acme:\n"+tc.b+orders).Tenants["acme"]
				if got := Diff(a, b); !slices.Equal(got, tc.want) {
					t.Errorf("Diff = %q, want %q", got, tc.want)
				}
			})
		}
	})
	t.Run("bindings", func(t *testing.T) {
		a := parse(t, "tenants:\n  acme:\n"+orders).Tenants["acme"]
		b := parse(t, "tenants:\n  acme:\n    max_concurrency: 2\n"+orders+"      more: {queue: more, module: 'builtin:echo-go'}\n").Tenants["acme"]
		if got := Diff(a, b); !slices.Equal(got, []string{"bindings", "max_concurrency"}) {
			t.Errorf("Diff = %q, want the bindings as a whole and max_concurrency", got)
		}
		if got := Diff(a, b, "bindings"); !slices.Equal(got, []string{"max_concurrency"}) {
			t.Errorf("Diff skipping bindings = %q", got)
		}
	})
	t.Run("config", func(t *testing.T) {
		base := "tenants:\n  acme:\n" + orders
		a := parse(t, base)
		b := parse(t, "log: {level: debug}\nadmin: {addr: '127.0.0.1:9'}\nmax_concurrency: 4\nbackends:\n  mem: {type: memory}\nmetrics: {per_binding: false}\ntenants:\n  acme:\n    weight: 2\n"+orders)
		b.BaseDir, b.File = "/elsewhere", "other.yaml" // not config keys
		want := []string{"admin.addr", "backends", "log.level", "max_concurrency", "metrics.per_binding", "tenants"}
		if got := Diff(*a, *b); !slices.Equal(got, want) {
			t.Errorf("Diff = %q, want %q", got, want)
		}
		want = []string{"admin.addr", "backends", "log.level", "metrics.per_binding"}
		if got := Diff(*a, *b, "tenants", "max_concurrency"); !slices.Equal(got, want) {
			t.Errorf("Diff skipping = %q, want %q", got, want)
		}
		if got := Diff(*a, *b, "tenants", "max_concurrency", "metrics", "admin"); !slices.Equal(got, []string{"backends", "log.level"}) {
			t.Errorf("Diff skipping whole blocks = %q", got)
		}
	})
}
