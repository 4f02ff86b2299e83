package config

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/admin"
	"github.com/wqhost/wqhost/internal/safefile"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
	"github.com/wqhost/wqhost/plugins/external"
	"github.com/wqhost/wqhost/runtime"
)

// A config that sets nothing but a binding's queue and module gets, for every setting a
// library package also has, that package's default: a host user and a library user who both
// leave a setting alone get the same behaviour. The documented column pins the value the
// README's defaults table promises, so changing a library default without the docs fails too.
func TestEffectiveDefaultsAreTheLibraryDefaults(t *testing.T) {
	c, err := Parse([]byte("tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Binding("acme", "orders")
	if err != nil {
		t.Fatal(err)
	}
	lim := c.Tenants["acme"].Limits
	tests := []struct {
		key                          string
		effective, library, document any
	}{
		{"batch_size", b.BatchSize, listener.DefaultBatchSize, 32},
		{"visibility_timeout", b.VisibilityTimeout, listener.DefaultVisibilityTimeout, 30 * time.Second},
		{"max_dequeue_count", b.MaxDequeueCount, listener.DefaultMaxDequeueCount, 5},
		{"min_workers", b.MinWorkers, listener.DefaultMinWorkers, 1},
		{"max_workers", b.MaxWorkers, listener.DefaultMaxWorkers, 16},
		{"push_fallback_poll", b.PushFallbackPoll, listener.DefaultPushFallbackPoll, 5 * time.Minute},
		{"backoff.policy", b.Backoff.Policy, builtin.DefaultBackoffName, "random-exponential"},
		{"backoff.min", b.Backoff.Min, listener.DefaultMinIdle, 100 * time.Millisecond},
		{"backoff.max", b.Backoff.Max, listener.DefaultMaxIdle, 60 * time.Second},
		{"scaler.policy", b.Scaler.Policy, builtin.DefaultScalerName, "target"},
		{"poison.policy", b.Poison.Policy, builtin.DefaultPoisonName, "retry-then-dead-letter"},
		{"poison.base_delay", b.Poison.BaseDelay, builtin.DefaultBaseDelay, time.Second},
		{"poison.max_delay", b.Poison.MaxDelay, builtin.DefaultPoisonMaxDelay, 60 * time.Second},
		{"poison.jitter", b.Poison.Jitter, builtin.DefaultJitter, 0.1},
		// A plugin's timeout is left 0 and the host passes it on: external's default applies.
		{"poison.timeout (0 = plugin default)", DefaultPluginTimeout, external.DefaultCallTimeout, 50 * time.Millisecond},
		{"pool.max_instances", b.Pool.MaxInstances, runtime.DefaultMaxInstances, 4},
		// Host-only defaults (a runtime pool keeps no instance warm and never reaps): pinned
		// to what the docs say.
		{"pool.min_instances", b.Pool.MinInstances, DefaultPoolMinInstances, 0},
		{"pool.idle_timeout", b.Pool.IdleTimeout, DefaultPoolIdleTimeout, time.Minute},
		{"limits.memory", int64(lim.Memory), int64(runtime.DefaultMemoryBytes), int64(128 << 20)},
		// host.go rounds limits.memory up to whole pages for runtime.TenantLimits.
		{"limits.memory in pages", uint32((int64(lim.Memory) + runtime.PageBytes - 1) / runtime.PageBytes), runtime.DefaultMemoryPages, uint32(2048)},
		{"limits.max_output_bytes", int(lim.MaxOutputBytes), runtime.DefaultMaxOutputBytes, 1 << 20},
		// 0 is passed to runtime.TenantLimits.HTTPRequests, which means the runtime's default.
		{"limits.http_concurrency (0 = runtime default)", DefaultHTTPConcurrency, runtime.DefaultTenantHTTPRequests, 64},
		// limits.compile is all 0 (checked below): the runtime's defaults apply, pinned here.
		{"limits.compile.max_functions", runtime.DefaultMaxFunctions, runtime.DefaultMaxFunctions, 100_000},
		{"limits.compile.max_function_bytes", runtime.DefaultMaxFunctionBytes, runtime.DefaultMaxFunctionBytes, 1 << 20},
		{"limits.compile.max_nesting_depth", runtime.DefaultMaxNestingDepth, runtime.DefaultMaxNestingDepth, 10_000},
		{"limits.compile.max_loop_depth", runtime.DefaultMaxLoopDepth, runtime.DefaultMaxLoopDepth, 500},
		{"limits.compile.max_branches", runtime.DefaultMaxBranches, runtime.DefaultMaxBranches, 10_000},
		{"limits.compile.max_locals", runtime.DefaultMaxLocals, runtime.DefaultMaxLocals, 2_000},
		{"limits.compile.timeout", runtime.DefaultCompileTimeout, runtime.DefaultCompileTimeout, 2 * time.Minute},
		{"limits.compile.memory", int64(runtime.DefaultCompileMemoryBytes), int64(runtime.DefaultCompileMemoryBytes), int64(1 << 30)},
		{"admin.max_body_bytes", int64(c.Admin.MaxBodyBytes), int64(admin.DefaultMaxBodyBytes), int64(64 << 10)},
		{"max_module_bytes", int64(c.MaxModuleBytes), int64(safefile.DefaultMaxBytes), int64(256 << 20)},
		{"batch_size maximum", MaxBatchSize, queue.MaxBatch, 32},
		// validate.go names the target scaler's default (0 = one receive batch per worker).
		{"scaler.target (0 = builtin default)", queue.MaxBatch, int(builtin.DefaultTargetPerWorker), 32},
		{"visibility_timeout and poison.max_delay maximum", MaxVisibility, queue.MaxVisibility, 7 * 24 * time.Hour},
		// The local store loads bodies up to its default limit: every message a config may
		// allow (not imported by the config itself, which would pull SQLite into it).
		{"limits.max_message_bytes maximum", int64(MaxMessageBytesCap), int64(local.DefaultMaxBodyBytes), int64(64 << 20)},
	}
	for _, tt := range tests {
		if tt.effective != tt.library {
			t.Errorf("%s: the host's default is %v, the library's %v", tt.key, tt.effective, tt.library)
		}
		if tt.effective != tt.document {
			t.Errorf("%s: the host's default is %v, the documented %v", tt.key, tt.effective, tt.document)
		}
	}
	if lim.Compile != (CompileLimits{}) {
		t.Errorf("limits.compile %+v: want all 0 (the runtime's defaults apply)", lim.Compile)
	}
	if lim.HTTPConcurrency != 0 || b.Poison.Timeout != 0 || b.Backoff.Timeout != 0 || b.Scaler.Timeout != 0 {
		t.Errorf("limits.http_concurrency %d, plugin timeouts %s %s %s: want 0 (the library's default applies)",
			lim.HTTPConcurrency, b.Backoff.Timeout, b.Scaler.Timeout, b.Poison.Timeout)
	}
}

// The built-in policies the host builds from a config that sets nothing (host/binding.go's
// policies) decide as the same policies built with zero options, as a library user builds
// them: the same retry delays and the same failure that dead-letters.
func TestEffectivePoliciesAreTheLibraryDefaults(t *testing.T) {
	c, err := Parse([]byte("tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'}\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Binding("acme", "orders")
	if err != nil {
		t.Fatal(err)
	}
	host := builtin.NewPoison(builtin.PoisonOptions{BaseDelay: b.Poison.BaseDelay, MaxDelay: b.Poison.MaxDelay})
	lib := builtin.NewPoison(builtin.PoisonOptions{})
	boom := errors.New("boom")
	deadAt := 0
	for count := 1; count <= 10; count++ {
		m := &queue.Message{ID: "m", DequeueCount: count}
		got := host.Decide(context.Background(), listener.Failure{Message: m, Outcome: outcome.Failed(boom), MaxDequeueCount: b.MaxDequeueCount})
		want := lib.Decide(context.Background(), listener.Failure{Message: m, Outcome: outcome.Failed(boom)})
		if got.Kind != want.Kind || got.After != want.After || got.Reason() != want.Reason() {
			t.Errorf("failure %d: the host's poison policy decides %+v, the library's %+v", count, got, want)
		}
		if got.Kind == outcome.KindReject && deadAt == 0 {
			deadAt = count
		}
	}
	if deadAt != 5 {
		t.Errorf("dead-lettered on failure %d, want the documented 5th", deadAt)
	}
	hb := builtin.NewBackoff(builtin.BackoffOptions{MinIdle: b.Backoff.Min, MaxIdle: b.Backoff.Max})
	lb := builtin.NewBackoff(builtin.BackoffOptions{})
	hMin, hMax := hb.Bounds()
	lMin, lMax := lb.Bounds()
	if hMin != lMin || hMax != lMax {
		t.Errorf("back-off bounds: the host's %s..%s, the library's %s..%s", hMin, hMax, lMin, lMax)
	}
}
