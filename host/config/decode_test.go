package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// knownBindingKeys is the "known keys here" list of a binding.
const knownBindingKeys = "abi, at_most_once, backend, backoff, batch, batch_size, breaker, config, function, http, max_dequeue_count, max_workers, min_workers, module, ordered, output, poison, pool, push, push_fallback_poll, queue, scaler, shards, visibility_timeout"

// TestDecodeProblems pins what a config that does not decode reports: every problem at
// once, in key order, each naming its full key path; a null where a value belongs, a
// key in the wrong case and a number where a word belongs are problems too, and a
// binding with a bad value is still validated as a whole beside the others.
func TestDecodeProblems(t *testing.T) {
	const bp = "tenants.acme.bindings.orders."
	for _, tc := range []struct {
		name, yaml string
		want       []string // the problems, in order
	}{
		{"null integer", binding("        batch_size:\n"),
			[]string{bp + "batch_size: expected an integer, got nothing"}},
		{"null string", binding("        output:\n"),
			[]string{bp + "output: expected a string, got nothing"}},
		{"null tenant", "tenants:\n  acme:\n",
			[]string{"tenants.acme: expected a mapping, got nothing"}},
		{"null binding", "tenants:\n  acme:\n    bindings:\n      orders:\n",
			[]string{"tenants.acme.bindings.orders: expected a mapping, got nothing"}},
		{"null block", "admin:\n" + binding(""),
			[]string{"admin: expected a mapping, got nothing"}},
		{"guest config values are scalars", binding("        config: {a: 1, b: true, c: ~, d: [1]}\n"),
			[]string{bp + "config.c: expected a string, got nothing", bp + "config.d: expected a string, got a list"}},
		{"keys are case-sensitive", binding("        Batch_Size: 3\n"),
			[]string{bp + "Batch_Size: unknown key (known keys here: " + knownBindingKeys + ")"}},
		{"a key named -", "\"-\": x\n" + binding(""),
			[]string{"-: unknown key (known keys here: admin, backends, cache_dir, data_dir, log, max_bindings, max_concurrency, max_module_bytes, memory_budget, metrics, shutdown, tenants)"}},
		{"every problem in key order", binding("        batch_size: 1.5\n        push: 1\n        batchx: 1\n        pool: {max_instances: x, foo: 1}\n"),
			[]string{
				bp + "batch_size: expected an integer, got 1.5",
				bp + "batchx: unknown key (known keys here: " + knownBindingKeys + ")",
				bp + "pool.foo: unknown key (known keys here: idle_timeout, max_instances, max_memory, max_uses, min_instances)",
				bp + `pool.max_instances: expected an integer, got "x"`,
				bp + "push: expected true or false, got 1",
			}},
		{"integer beyond int64", binding("        max_workers: 18446744073709551615\n"),
			[]string{bp + "max_workers: expected an integer, got 18446744073709551615"}},
		{"negative size", "tenants:\n  acme:\n    limits: {memory: -1}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n",
			[]string{`tenants.acme.limits.memory: expected a size such as "64MiB", got -1`}},
		{"number for a string", binding("        abi: 1.5\n"),
			[]string{bp + "abi: expected a string, got 1.5"}},
		{"list items", binding("        scaler: {policy: depth-table, table: [{depth: x}, 3]}\n"),
			[]string{bp + `scaler.table[0].depth: expected an integer, got "x"`, bp + "scaler.table[1]: expected a mapping, got 3"}},
		{"list items in index order", binding("        http: {allow: [" + strings.Repeat("'https://x.example.com', ", 2) + "1, " + strings.Repeat("'https://x.example.com', ", 7) + "2]}\n"),
			[]string{bp + "http.allow[2]: expected a string, got 1", bp + "http.allow[10]: expected a string, got 2"}},
		{"scalar for a list", binding("        http: {allow: 3}\n"),
			[]string{bp + "http.allow: expected a list, got 3"}},
		{"numeric names are map keys, not indexes", "tenants:\n  \"1\":\n    bindings:\n      \"2\": {queue: q, module: x, shards: [a, 3]}\n",
			[]string{"tenants.1.bindings.2.shards[1]: expected a string, got 3"}},
		{"keys holding brackets", binding("        config: {\"a]b\": [1], \"c[0]\": {d: 1}, \"e]\": ~}\n"),
			[]string{bp + "config.a]b: expected a string, got a list", bp + "config.c[0]: expected a string, got a mapping", bp + "config.e]: expected a string, got nothing"}},
		{"a binding that does not decode is still validated", binding("        batch_size: many\n        max_workers: 2000\n"),
			[]string{bp + `batch_size: expected an integer, got "many"`, bp + "max_workers: 2000 is outside 1..1024"}},
		{"and still consumes its queue", binding("        batch_size: many\n      again: {queue: orders, module: 'builtin:echo-go'}\n"),
			[]string{bp + `batch_size: expected an integer, got "many"`, bp + `queue: queue "orders" is already consumed by tenants.acme.bindings.again`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), t.TempDir())
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want an invalid config", err)
			}
			got := make([]string, len(ce.Problems))
			for i, p := range ce.Problems {
				got[i] = p.Error()
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestGuestConfigTakesScalars: a binding's config map (read by the guest as strings)
// takes numbers and booleans as they are written.
func TestGuestConfigTakesScalars(t *testing.T) {
	c, err := Parse([]byte(binding("        config: {s: x, n: 12, f: 1.5, b: true}\n")), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got := c.Tenants["acme"].Bindings["orders"].Config
	want := map[string]string{"s": "x", "n": "12", "f": "1.5", "b": "true"}
	if len(got) != len(want) {
		t.Fatalf("config = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("config[%s] = %q, want %q", k, got[k], v)
		}
	}
}

// TestEnvOverridesOfEveryType: environment variables are strings; a list, an integer, a
// boolean, a duration and a size each read from one.
func TestEnvOverridesOfEveryType(t *testing.T) {
	const p = "WQHOST_TENANTS__DEFAULT__BINDINGS__BILLING__"
	c, err := Load(LoadOptions{Environ: []string{
		p + "HTTP__ALLOW=https://a.example.com, https://b.example.com,",
		p + "MAX_WORKERS= 7",
		p + "PUSH=true",
		p + "VISIBILITY_TIMEOUT=45s",
		p + "POOL__MAX_MEMORY=64MiB",
	}})
	if err != nil {
		t.Fatal(err)
	}
	b := c.Tenants[DefaultTenant].Bindings["billing"]
	if !slices.Equal(b.HTTP.Allow, []string{"https://a.example.com", "https://b.example.com"}) {
		t.Errorf("http.allow = %q", b.HTTP.Allow)
	}
	if b.MaxWorkers != 7 || !b.Push || b.VisibilityTimeout.String() != "45s" || b.Pool.MaxMemory != 64<<20 {
		t.Errorf("max_workers %d, push %v, visibility_timeout %s, pool.max_memory %s", b.MaxWorkers, b.Push, b.VisibilityTimeout, b.Pool.MaxMemory)
	}
}
