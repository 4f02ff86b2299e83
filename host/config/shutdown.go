package config

import (
	"time"

	"github.com/wqhost/wqhost/internal/defaults"
)

// DefaultShutdownGrace is shutdown.grace's default: the listener's own.
const DefaultShutdownGrace = defaults.ShutdownGrace

// MaxShutdownGrace bounds shutdown.grace: a stop that may take longer than an hour is a
// stuck host to an operator (and to Kubernetes, whose grace period must cover it).
const MaxShutdownGrace = time.Hour

// Shutdown configures how the host stops on SIGTERM (or a binding a reload removes).
type Shutdown struct {
	// Grace is how long handlers in flight may run on after a stop is asked for; at its
	// end they are cancelled (and abandoned ShutdownSlack later if they do not return).
	// Leased messages whose handler has not started are released at once, whatever the
	// grace. Default DefaultShutdownGrace (30s).
	Grace time.Duration `koanf:"grace"`
}

// validateShutdown checks shutdown.grace.
func (c *Config) validateShutdown(fail failFunc) {
	if g := c.Shutdown.Grace; g <= 0 || g > MaxShutdownGrace {
		fail("shutdown.grace", "%s must be above 0 and at most %s", g, MaxShutdownGrace)
	}
}
