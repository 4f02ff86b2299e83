package config

import (
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/internal/breaker"
)

// TestBreakerKeys: a binding's breaker: block is read, defaults to the breaker package's
// threshold with the durations derived from the time limit (0), and bad values are refused
// naming the key.
func TestBreakerKeys(t *testing.T) {
	parse := func(block string) (*Config, error) {
		return Parse([]byte("tenants:\n  acme:\n    bindings:\n      orders: {queue: orders, module: 'builtin:echo-go'"+block+"}\n"), t.TempDir())
	}
	c, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Binding("acme", "orders")
	if b.Breaker != (Breaker{Threshold: breaker.DefaultThreshold}) || DefaultBreakerThreshold != 3 {
		t.Errorf("default breaker %+v, want threshold %d (documented 3) and durations 0", b.Breaker, breaker.DefaultThreshold)
	}
	c, err = parse(", breaker: {threshold: 5, cooldown: 2s, max_cooldown: 1m, cheap_failure: 250ms}")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = c.Binding("acme", "orders")
	if want := (Breaker{Threshold: 5, Cooldown: 2 * time.Second, MaxCooldown: time.Minute, CheapFailure: 250 * time.Millisecond}); b.Breaker != want {
		t.Errorf("breaker %+v, want %+v", b.Breaker, want)
	}
	for _, tc := range []struct{ block, want string }{
		{", breaker: {threshold: -1}", "tenants.acme.bindings.orders.breaker.threshold: -1 is outside 0..1000"},
		{", breaker: {threshold: 1001}", "tenants.acme.bindings.orders.breaker.threshold: 1001 is outside 0..1000"},
		{", breaker: {cooldown: -1s}", "tenants.acme.bindings.orders.breaker.cooldown: -1s is outside"},
		{", breaker: {cheap_failure: 30d}", "tenants.acme.bindings.orders.breaker.cheap_failure"},
		{", breaker: {cooldown: 1m, max_cooldown: 10s}", "tenants.acme.bindings.orders.breaker.max_cooldown: 10s is below breaker.cooldown 1m0s"},
		{", breaker: {thresold: 2}", "breaker.thresold"},
	} {
		if _, err := parse(tc.block); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.block, err, tc.want)
		}
	}
}
