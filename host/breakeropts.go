package host

import (
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/internal/breaker"
)

// breakerOptions maps a binding's breaker: block onto the breaker's options: threshold 0
// (off) is the breaker's "never", the durations' 0 its defaults derived from the time limit.
func breakerOptions(timeout time.Duration, c config.Breaker) breaker.Options {
	o := breaker.Options{Timeout: timeout, Threshold: c.Threshold, Cooldown: c.Cooldown, MaxCooldown: c.MaxCooldown, CheapFailure: c.CheapFailure}
	if c.Threshold == 0 {
		o.Threshold = -1
	}
	return o
}
