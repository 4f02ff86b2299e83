package host

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/wqhost/wqhost/internal/wasmtest"
)

// startTrapModule writes a wqhost/v1 module whose _initialize runs passes loop passes (about
// a fuel unit each) and whose handler traps at once, and returns its path: every message
// throws its instance away, so the next one starts a fresh one and pays the start again.
func startTrapModule(t *testing.T, passes int32) string {
	t.Helper()
	mod := wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "_initialize", Body: wasmtest.CountTo(0, passes)},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: []byte{0x00}}, // unreachable
	)
	path := filepath.Join(t.TempDir(), "start-trap.wasm")
	if err := os.WriteFile(path, mod, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStartFuelChargedToTheTenant: the fuel an instance's start function burns is charged
// to the binding's and the tenant's usage and to the tenant's fuel quota, whether a message
// had to start the instance (each one here: the handler traps) or the pool started it ahead
// of demand (min_instances): the quota throttles a tenant whose start functions burn fuel
// while its handlers trap, holding its messages in the queue. Before, a start was never
// metered: 14 such messages of 3·10⁸ passes each were metered fuel 14 in total, and the
// quota never throttled.
func TestStartFuelChargedToTheTenant(t *testing.T) {
	const passes = 1 << 20
	guest := startTrapModule(t, passes)
	for _, tc := range []struct {
		name     string
		minInst  int
		quota    int
		messages int
	}{
		// A start per message: about 8 messages' starts spend the quota.
		{name: "starts for messages", quota: 8 * passes, messages: 40},
		// The warm instance's start alone spends it, before any message.
		{name: "min_instances", minInst: 1, quota: passes / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newHost(t, fmt.Sprintf(`  a:
    limits: {timeout: 10s, fuel_quota: {fuel: %d, period: 744h}}
    bindings:
      s: {queue: in, module: %q, pool: {min_instances: %d}, max_workers: 1, max_dequeue_count: 100, breaker: {threshold: 0}, backoff: {min: 5ms, max: 50ms}, poison: {base_delay: 5ms, max_delay: 20ms}}
`, tc.quota, guest, tc.minInst))
			run(t, h)
			if tc.messages > 0 {
				bodies := make([]string, tc.messages)
				for i := range bodies {
					bodies[i] = "m"
				}
				send(t, h, "a", "in", bodies...)
			}
			eventually(t, "the quota spent", func() bool {
				q := tenantStatus(t, h, "a").Quota
				return q != nil && q.Exhausted
			})
			ts, bs := tenantStatus(t, h, "a"), bindingStatus(t, h, "a", "s")
			if bs.Usage.Starts == 0 || bs.Usage.StartFuel < passes/2 || bs.Usage.Fuel < bs.Usage.StartFuel || ts.Usage.Fuel != bs.Usage.Fuel || ts.Quota.Used < uint64(tc.quota) {
				t.Fatalf("binding usage %+v, tenant usage %+v, quota %+v: want the starts' fuel (%d passes each) charged to all three", bs.Usage, ts.Usage, ts.Quota, passes)
			}
			if tc.messages > 0 {
				eventually(t, "a throttled lease", func() bool { return tenantStatus(t, h, "a").Quota.Throttles > 0 })
				if d := depth(t, h, "a", "in"); d == 0 || bs.Poisoned != 0 {
					t.Fatalf("input depth %d, poisoned %d: want the messages held in the queue", d, bs.Poisoned)
				}
			} else if bs.Usage.Calls != 0 {
				t.Fatalf("usage %+v: want the warm start charged without a call", bs.Usage)
			}
			t.Logf("%s: %d calls, %d starts, fuel %d (starts %d), quota used %d of %d", tc.name, bs.Usage.Calls, bs.Usage.Starts, bs.Usage.Fuel, bs.Usage.StartFuel, ts.Quota.Used, tc.quota)
		})
	}
}

// TestBreakerOpensOnRestartsForcedByCheapTraps: a handler that traps at once (a cheap
// failure, well within cheap_failure) on an instance whose start function runs for
// milliseconds makes every message pay a fresh start; those starts add up, and the breaker
// opens once a cheap_failure's worth of them has been forced by failures in a row. Before,
// each trap was cheap by itself and the breaker never opened.
func TestBreakerOpensOnRestartsForcedByCheapTraps(t *testing.T) {
	guest := startTrapModule(t, 1<<20)
	h, _ := newHost(t, fmt.Sprintf(`  a:
    limits: {timeout: 10s}
    bindings:
      s: {queue: in, module: %q, max_workers: 1, max_dequeue_count: 100, breaker: {threshold: 1, cheap_failure: 300ms, cooldown: 1m}, backoff: {min: 5ms, max: 50ms}, poison: {base_delay: 5ms, max_delay: 20ms}}
`, guest))
	run(t, h)
	bodies := make([]string, 50)
	for i := range bodies {
		bodies[i] = "m"
	}
	send(t, h, "a", "in", bodies...)
	eventually(t, "the breaker open", func() bool { return bindingStatus(t, h, "a", "s").Breaker.Trips > 0 })
	bs := bindingStatus(t, h, "a", "s")
	t.Logf("breaker %+v after %d calls, %d starts taking %.3fs", bs.Breaker, bs.Usage.Calls, bs.Usage.Starts, bs.Usage.StartSeconds)
	if bs.Usage.StartSeconds < 0.3 {
		t.Fatalf("breaker opened after %.3fs of starts: want at least cheap_failure (300ms)", bs.Usage.StartSeconds)
	}
}
