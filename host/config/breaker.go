package config

import "time"

// DefaultBreakerThreshold is breaker.threshold's default: counted failures in a row that
// open a binding's circuit breaker.
const DefaultBreakerThreshold = 3

// MaxBreakerThreshold is breaker.threshold's largest value.
const MaxBreakerThreshold = 1000

// Breaker tunes a binding's circuit breaker (host/internal/breaker, docs/guarantees.md):
// which failures count, how many in a row open it, and how long it stays open. Only
// expensive failures count: a time-limit or memory-limit kill, or a trap after at least
// CheapFailure; a trap that comes sooner (a bad pointer, a panic on bad input) fails its
// message, which the poison policy retries and dead-letters, without slowing the binding.
type Breaker struct {
	// Threshold is how many counted failures in a row open the breaker; 0: never (off).
	Threshold int `koanf:"threshold"`
	// Cooldown is the first time the open breaker leases nothing; 0: limits.timeout.
	Cooldown time.Duration `koanf:"cooldown"`
	// MaxCooldown caps the cool-down, doubled by each failed probe; 0: 8 × cooldown.
	MaxCooldown time.Duration `koanf:"max_cooldown"`
	// CheapFailure: a trap within this of the call's start does not count; 0: a tenth of
	// limits.timeout. 1ns counts every trap.
	CheapFailure time.Duration `koanf:"cheap_failure"`
}

// validateBreaker checks a binding's breaker: block.
func validateBreaker(fail failFunc, bp string, b Breaker) {
	if b.Threshold < 0 || b.Threshold > MaxBreakerThreshold {
		fail(bp+".breaker.threshold", "%d is outside 0..%d (0 = the breaker never opens)", b.Threshold, MaxBreakerThreshold)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"cooldown", b.Cooldown}, {"max_cooldown", b.MaxCooldown}, {"cheap_failure", b.CheapFailure}} {
		if d.v < 0 || d.v > MaxVisibility {
			fail(bp+".breaker."+d.key, "%s is outside 0..%s (0 = derived from limits.timeout)", d.v, MaxVisibility)
		}
	}
	if b.MaxCooldown > 0 && b.Cooldown > 0 && b.MaxCooldown < b.Cooldown {
		fail(bp+".breaker.max_cooldown", "%s is below breaker.cooldown %s", b.MaxCooldown, b.Cooldown)
	}
}
