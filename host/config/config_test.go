package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestDefaultIsTheDocumentedEmbeddedConfig(t *testing.T) {
	c, err := Load(LoadOptions{Environ: []string{"WQHOST_DATA_DIR=/tmp/wq"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/tmp/wq" || c.Admin.Addr != "127.0.0.1:8480" {
		t.Fatalf("data_dir %q admin %q", c.DataDir, c.Admin.Addr)
	}
	b, err := c.Binding(DefaultTenant, "billing")
	if err != nil {
		t.Fatal(err)
	}
	want := Binding{Backend: "local", Queue: "transactions", Output: "priced", Module: "builtin:billing-go", ABI: ABIWqhostV1,
		BatchSize: 32, VisibilityTimeout: 30 * time.Second, MaxDequeueCount: 5, MinWorkers: 1, MaxWorkers: 16}
	if b.Backend != want.Backend || b.Queue != want.Queue || b.Output != want.Output || b.Module != want.Module ||
		b.ABI != want.ABI || b.BatchSize != want.BatchSize || b.VisibilityTimeout != want.VisibilityTimeout ||
		b.MaxDequeueCount != want.MaxDequeueCount || b.MinWorkers != want.MinWorkers || b.MaxWorkers != want.MaxWorkers {
		t.Fatalf("binding = %+v", b)
	}
	if b.Backoff.Min != 100*time.Millisecond || b.Backoff.Max != 60*time.Second || b.Backoff.Policy != BackoffRandomExponential {
		t.Fatalf("backoff = %+v", b.Backoff)
	}
	tn := c.Tenants[DefaultTenant]
	if tn.Limits.Memory != 128<<20 || tn.Limits.Timeout != 30*time.Second {
		t.Fatalf("limits = %+v", tn.Limits)
	}
	if got := c.LocalPath(c.Backends["local"]); got != "/tmp/wq/wqhost.db" {
		t.Fatalf("local path %s", got)
	}
}

func TestExampleConfigLoads(t *testing.T) {
	c, err := Load(fileOptions(t, LoadOptions{File: "../../examples/wqhost.yaml", Environ: []string{}}))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Tenants["acme"].Bindings); n != 3 {
		t.Fatalf("acme bindings = %d", n)
	}
	if bt := c.Tenants["acme"].Bindings["bulk"].Batch; bt != (Batch{MaxMessages: 100, MaxWait: 500 * time.Millisecond, MaxBytes: 4 << 20}) {
		t.Fatalf("bulk binding's batch = %+v", bt)
	}
	if got := c.PhysicalQueue("acme", "local", "orders"); got != "acme.orders" {
		t.Fatalf("physical queue %q", got)
	}
	if got := c.PhysicalQueue("default", "local", "transactions"); got != "transactions" {
		t.Fatalf("default tenant queue %q", got)
	}
	if got := c.PhysicalQueue("acme", "cloud", "orders"); got != "4-acme-orders" {
		t.Fatalf("azure physical queue %q", got)
	}
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "c.yaml", `
data_dir: /from/file
admin: {addr: "127.0.0.1:1111"}
tenants:
  acme:
    bindings:
      orders: {queue: orders, module: "builtin:echo-go", batch_size: 8}
`)
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.String("data-dir", "./data", "")
	fs.String("admin", "127.0.0.1:8480", "")
	fs.Int("count", 1, "") // not a config flag: ignored
	if err := fs.Parse([]string{"--admin", "127.0.0.1:3333"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(fileOptions(t, LoadOptions{File: f, Flags: fs, Environ: []string{
		"WQHOST_DATA_DIR=/from/env",
		"WQHOST_ADMIN__ADDR=127.0.0.1:2222",
		"WQHOST_TENANTS__ACME__BINDINGS__ORDERS__BATCH_SIZE=16",
		"OTHER=1",
		"WQHOST_ADMIN_TOKEN=secret", // a secret for admin.token_env, not an override
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/env" {
		t.Errorf("data_dir = %q; env beats file, an unset flag changes nothing", c.DataDir)
	}
	if c.Admin.Addr != "127.0.0.1:3333" {
		t.Errorf("admin.addr = %q; a set flag beats env", c.Admin.Addr)
	}
	if b := c.Tenants["acme"].Bindings["orders"]; b.BatchSize != 16 || b.MaxDequeueCount != 5 {
		t.Errorf("binding = batch %d, max dequeue %d; env overrides a nested key, defaults stay", b.BatchSize, b.MaxDequeueCount)
	}
	if c.BaseDir != dir {
		t.Errorf("base dir %q, want %q", c.BaseDir, dir)
	}
}

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// binding wraps a binding body (indented 8 spaces) in a minimal valid config.
func binding(body string) string {
	return "tenants:\n  acme:\n    bindings:\n      orders:\n        queue: orders\n        module: builtin:echo-go\n" + body
}

func TestBadConfigs(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "mods/ok.wasm", "\x00asm")
	write(t, dir, "outside.wasm", "\x00asm")
	cases := []struct {
		name, yaml string
		want       []string // each must appear; the number of problems must match
	}{
		{"unknown key", binding("        batchsize: 8\n"),
			[]string{"tenants.acme.bindings.orders.batchsize: unknown key (known keys here: abi,"}},
		{"one token variable for two principals", "admin: {token_env: ADMIN_TOKEN}\n" + strings.Replace(binding(""), "  acme:\n", "  acme:\n    token_env: ADMIN_TOKEN\n", 1),
			[]string{"tenants.acme.token_env: names ADMIN_TOKEN, as admin.token_env does: every admin token must be distinct"}},
		{"unknown top-level key", "tenant: {}\n" + binding(""),
			[]string{"tenant: unknown key"}},
		{"wrong type int", binding("        batch_size: many\n"),
			[]string{`tenants.acme.bindings.orders.batch_size: expected an integer, got "many"`}},
		{"wrong type mapping", "tenants:\n  acme:\n    bindings: [a, b]\n",
			[]string{"tenants.acme.bindings: expected a mapping, got a list"}},
		{"wrong type bool", binding("        push: maybe\n"),
			[]string{`tenants.acme.bindings.orders.push: expected true or false, got "maybe"`}},
		{"bad duration", binding("        visibility_timeout: 30 seconds\n"),
			[]string{`tenants.acme.bindings.orders.visibility_timeout: expected a duration such as "30s"`}},
		{"duration too large", binding("        visibility_timeout: 999999999h\n"),
			[]string{`tenants.acme.bindings.orders.visibility_timeout: "999999999h" is out of range (a duration holds at most 2562047h47m16.854775807s)`}},
		{"duration as bare number", binding("        backoff: {min: 100}\n"),
			[]string{`tenants.acme.bindings.orders.backoff.min: expected a duration such as "30s" or "100ms", got 100`}},
		{"bad size", "tenants:\n  acme:\n    limits: {memory: lots}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n",
			[]string{`tenants.acme.limits.memory: expected a size such as "64MiB", got "lots"`}},
		{"batch too many messages", binding("        batch: {max_messages: 10001}\n"),
			[]string{"tenants.acme.bindings.orders.batch.max_messages: 10001 is outside 0..10000"}},
		{"batch bad wait and bytes", binding("        batch: {max_messages: 10, max_wait: -1s, max_bytes: -1}\n"),
			[]string{"tenants.acme.bindings.orders.batch.max_wait: -1s is outside 0..15m0s", "tenants.acme.bindings.orders.batch.max_bytes: "}},
		{"batch unknown key", binding("        batch: {max_msgs: 10}\n"),
			[]string{"tenants.acme.bindings.orders.batch.max_msgs: unknown key (known keys here: max_bytes, max_messages, max_wait)"}},
		{"batch on wasi-stdio", binding("        abi: wasi-stdio\n        batch: {max_messages: 10}\n"),
			[]string{"tenants.acme.bindings.orders.batch: needs abi wqhost/v1"}},
		{"batch on extism", binding("        abi: extism\n        function: count_vowels\n        batch: {max_messages: 10}\n"),
			[]string{"tenants.acme.bindings.orders.batch: needs abi wqhost/v1 (an Extism plugin handles one message per call)"}},
		{"function on wasi-stdio", binding("        abi: wasi-stdio\n        function: run\n"),
			[]string{"tenants.acme.bindings.orders.function: is the function an Extism plugin's calls run"}},
		{"call output cap", "tenants:\n  acme:\n    limits: {max_call_output_bytes: 2GiB}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n",
			[]string{"tenants.acme.limits.max_call_output_bytes: 2GiB is outside 0..1GiB"}},
		{"compile caps", "tenants:\n  acme:\n    limits: {compile: {max_nesting_depth: -1, max_branches: 2000000, max_function_bytes: 1GiB, timeout: 2h, memory: 1MiB}}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n",
			[]string{"tenants.acme.limits.compile.max_nesting_depth: -1 is outside 0..100000 (0 = the default)",
				"tenants.acme.limits.compile.max_branches: 2000000 is outside 0..1000000 (0 = the default)",
				"tenants.acme.limits.compile.max_function_bytes: 1073741824 is outside 0..67108864 (0 = the default)",
				"tenants.acme.limits.compile.timeout: 2h0m0s is outside 0..1h (0 = 2m)",
				"tenants.acme.limits.compile.memory: 1MiB is outside 64MiB..64GiB (0 = 1GiB)"}},
		{"fuel quota", "tenants:\n  acme:\n    limits: {fuel_quota: {fuel: -1, period: 1h}}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n  beta:\n    limits: {fuel_quota: {fuel: 1000000, period: 1s}}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n  gamma:\n    limits: {fuel_quota: {period: 1h}}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n  delta:\n    limits: {fuel_quota: {fuel: 10, perod: 1h}}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n",
			[]string{"tenants.acme.limits.fuel_quota.fuel: -1 is negative (0 = no quota)",
				"tenants.beta.limits.fuel_quota.period: 1s is outside 1m0s..744h0m0s",
				"tenants.gamma.limits.fuel_quota.fuel: period 1h0m0s is set but fuel is 0",
				"tenants.delta.limits.fuel_quota.perod: unknown key",
				"tenants.delta.limits.fuel_quota.period: 0s is outside 1m0s..744h0m0s"}},
		{"batch size too large", binding("        batch_size: 64\n"),
			[]string{"tenants.acme.bindings.orders.batch_size: 64 is above the maximum 32"}},
		{"batch size zero", binding("        batch_size: 0\n"),
			[]string{"tenants.acme.bindings.orders.batch_size: 0 is below the minimum 1"}},
		{"min above max workers", binding("        min_workers: 4\n        max_workers: 2\n"),
			[]string{"tenants.acme.bindings.orders.min_workers: 4 is above max_workers 2"}},
		{"zero workers without push", binding("        min_workers: 0\n"),
			[]string{"tenants.acme.bindings.orders.min_workers: 0 needs push: true"}},
		{"unknown backoff policy", binding("        backoff: {policy: linear}\n"),
			[]string{`tenants.acme.bindings.orders.backoff.policy: unknown policy "linear" (known: random-exponential)`}},
		{"unknown scaler policy", binding("        scaler: {policy: magic}\n"),
			[]string{`tenants.acme.bindings.orders.scaler.policy: unknown policy "magic" (known: depth-table, target)`}},
		{"sharded without logical name", "tenants:\n  acme:\n    bindings:\n      orders: {shards: [o-0, o-1], module: 'builtin:echo-go'}\n",
			[]string{"tenants.acme.bindings.orders.queue: required (with shards"}},
		{"unknown poison policy", binding("        poison: {policy: ignore}\n"),
			[]string{`tenants.acme.bindings.orders.poison.policy: unknown policy "ignore"`}},
		{"poison jitter above 1", binding("        poison: {jitter: 2}\n"),
			[]string{"tenants.acme.bindings.orders.poison.jitter: 2 is outside 0..1"}},
		{"negative target", binding("        scaler: {policy: target, target: -3}\n"),
			[]string{"tenants.acme.bindings.orders.scaler.target: -3 is negative"}},
		{"descending depth table", binding("        scaler: {policy: depth-table, table: [{depth: 10, workers: 2}, {depth: 5, workers: 4}]}\n"),
			[]string{"tenants.acme.bindings.orders.scaler.table[1].depth: 5 is not above the previous row's 10"}},
		{"module path traversal", "tenants:\n  acme:\n    module_dir: mods\n    bindings:\n      orders: {queue: orders, module: mods/../outside.wasm}\n",
			[]string{`tenants.acme.bindings.orders.module: "mods/../outside.wasm" is outside the tenant's module_dir mods`}},
		{"absolute module outside module_dir", "tenants:\n  acme:\n    module_dir: mods\n    bindings:\n      orders: {queue: orders, module: " + filepath.Join(dir, "outside.wasm") + "}\n",
			[]string{"is outside the tenant's module_dir mods"}},
		{"local store escapes data_dir", "backends:\n  local: {type: local, path: ../../etc/db}\n" + binding(""),
			[]string{`backends.local.path: "../../etc/db" escapes data_dir`}},
		{"unknown backend", binding("        backend: s3\n"),
			[]string{`tenants.acme.bindings.orders.backend: "s3" is not a configured backend`}},
		{"nats without urls", "backends:\n  q: {type: nats}\n" + binding(""),
			[]string{`backends.q.nats.urls: at least one server url is required for a backend of type nats`}},
		{"nats two ways to authenticate", "backends:\n  q: {type: nats, nats: {urls: [nats://x:4222], creds_file: a.creds, token_env: T}}\n" + binding(""),
			[]string{`backends.q.nats: at most one of creds_file`}},
		{"nats ordered sharded", "backends:\n  q: {type: nats, nats: {urls: [nats://x:4222]}}\ntenants:\n  default:\n    bindings:\n      b: {backend: q, queue: in, shards: [s1, s2], ordered: true, module: 'builtin:echo-go'}\n",
			[]string{`a sharded queue has no FIFO order across its shards`}},
		{"unknown backend type", "backends:\n  q: {type: kafka}\n" + binding(""),
			[]string{`backends.q.type: "kafka" is not one of local, azure, nats, memory`}},
		{"azure name too long after prefix", "backends:\n  cloud: {type: azure, connection_string_env: X}\ntenants:\n  a-rather-long-tenant-name:\n    bindings:\n      b: {backend: cloud, queue: a-queue-name-that-is-long-enough-to-overflow, module: 'builtin:echo-go'}\n",
			[]string{`tenants.a-rather-long-tenant-name.bindings.b.queue: the Azure queue name "25-a-rather-long-tenant-name-a-queue-name-that-is-long-enough-to-overflow" is 73 characters, outside Azure's 3..63`}},
		{"azure without credentials", "backends:\n  cloud: {type: azure}\n" + binding(""),
			[]string{"backends.cloud: exactly one of connection_string_env"}},
		{"negative idle budget", "backends:\n  cloud: {type: azure, connection_string_env: X, idle_calls_per_hour: -1}\n" + binding(""),
			[]string{"backends.cloud.idle_calls_per_hour: -1 is outside 0..36000000"}},
		{"idle budget on a local backend", "backends:\n  local: {type: local, idle_calls_per_hour: 3600}\n" + binding(""),
			[]string{"backends.local.idle_calls_per_hour: applies to azure backends only: a local backend wakes its idle bindings when a message arrives"}},
		{"bad queue name", "tenants:\n  acme:\n    bindings:\n      orders: {queue: Orders_Q, module: 'builtin:echo-go'}\n",
			[]string{`tenants.acme.bindings.orders.queue: queue name "Orders_Q" must be`}},
		{"output loops to input", binding("        output: orders\n"),
			[]string{`tenants.acme.bindings.orders.output: output "orders" is the binding's own input queue`}},
		{"two bindings on one queue", binding("      again: {queue: orders, module: 'builtin:echo-go'}\n"),
			[]string{`tenants.acme.bindings.orders.queue: queue "orders" is already consumed by tenants.acme.bindings.again`}},
		{"pool above tenant instances", "tenants:\n  acme:\n    limits: {instances: 2}\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go', pool: {max_instances: 8}}\n",
			[]string{"tenants.acme.bindings.orders.pool.max_instances: 8 is outside 1..2 (tenants.acme.limits.instances)"}},
		{"bad abi", binding("        abi: wasi\n"),
			[]string{`tenants.acme.bindings.orders.abi: "wasi" is not one of wqhost/v1, wasi-stdio, extism`}},
		{"bad log format", "log: {format: xml}\n" + binding(""),
			[]string{`log.format: "xml" is not one of text, json`}},
		{"bad admin addr", "admin: {addr: localhost}\n" + binding(""),
			[]string{`admin.addr: "localhost" is not host:port`}},
		{"bad tenant name", "tenants:\n  Acme:\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n",
			[]string{`tenants.Acme: tenant name "Acme" must be lower-case`}},
		{"no tenants", "data_dir: /x\n", []string{"tenants: no tenant configured"}},
		{"invalid yaml", "tenants: [\n", []string{"invalid YAML"}},
		{"top level a word", "x\n", []string{`invalid YAML: the top level must be a mapping of keys (tenants:, admin:, ...), got the value "x" at line 1`}},
		{"top level a list", "# c\n- tenants\n", []string{"invalid YAML: the top level must be a mapping of keys (tenants:, admin:, ...), got a list at line 2"}},
		{"several problems at once", binding("        batch_size: 64\n        max_dequeue_count: 0\n        scaler: {policy: magic}\n"),
			[]string{"batch_size: 64 is above the maximum 32", "max_dequeue_count: 0 is outside 1..1000", `scaler.policy: unknown policy "magic"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), dir)
			if err == nil {
				t.Fatal("config accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			var ce *Error
			if errors.As(err, &ce) && len(ce.Problems) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%v", len(ce.Problems), len(tc.want), err)
			}
		})
	}
}

func TestLoadWantsTheFileRead(t *testing.T) {
	// host/config reads no files: a file named without its bytes is refused, not taken
	// for an empty config.
	_, err := Load(LoadOptions{File: "wqhost.yaml", Environ: []string{}})
	if err == nil || !strings.Contains(err.Error(), "wqhost.yaml: LoadOptions.Data not set") {
		t.Fatalf("err = %v", err)
	}
}

// fileOptions reads opts.File into opts as host/source.LoadConfig does, for tests of
// config files in the repository.
func fileOptions(t *testing.T, opts LoadOptions) LoadOptions {
	t.Helper()
	data, err := os.ReadFile(opts.File)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(opts.File)
	if err != nil {
		t.Fatal(err)
	}
	opts.Data, opts.BaseDir = data, filepath.Dir(abs)
	return opts
}

func TestEnvOverrideTypoBelowAKnownKeyIsAnError(t *testing.T) {
	_, err := Load(LoadOptions{Environ: []string{"WQHOST_ADMIN__ADDRESS=127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), "admin.address: unknown key") {
		t.Fatalf("err = %v", err)
	}
}

func TestBadEnvOverrideNamesTheKey(t *testing.T) {
	_, err := Load(LoadOptions{Environ: []string{"WQHOST_TENANTS__DEFAULT__BINDINGS__BILLING__BATCH_SIZE=lots"}})
	if err == nil || !strings.Contains(err.Error(), `tenants.default.bindings.billing.batch_size: expected an integer, got "lots"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"64MiB": 64 << 20, "1GiB": 1 << 30, "10KB": 10000, "123": 123, " 2 MiB ": 2 << 20} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "1.5MiB", "MiB", "99999999999GiB"} {
		if _, err := ParseByteSize(bad); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", bad)
		}
	}
}

func TestQueueBackendFindsPoisonQueues(t *testing.T) {
	c, err := Parse([]byte("backends:\n  mem: {type: memory}\n"+binding("        backend: mem\n        output: done\n")), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]string{"orders": "mem", "orders-poison": "mem", "done": "mem", "elsewhere": "local"} {
		if got, err := c.QueueBackend("acme", q); err != nil || got != want {
			t.Errorf("QueueBackend(acme, %s) = %q, %v; want %q", q, got, err, want)
		}
	}
	if _, err := c.QueueBackend("nobody", "orders"); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("unknown tenant: %v", err)
	}
}
