package external

import (
	"log/slog"
	"time"

	"github.com/wqhost/wqhost/internal/clock"
	"github.com/wqhost/wqhost/internal/defaults"
	"github.com/wqhost/wqhost/listener/queue"
)

// Defaults of Config's zero fields.
const (
	DefaultCallTimeout    = defaults.PluginCallTimeout // 50ms
	DefaultStartTimeout   = 10 * time.Second
	DefaultHealthInterval = time.Second
	DefaultRestartMin     = 100 * time.Millisecond
	DefaultRestartMax     = 30 * time.Second
	DefaultMaxReasonLen   = 1024
	DefaultMaxTimeouts    = 5
)

// Limits bound a plugin's answers to what the binding allows. Zero fields mean "no bound
// beyond the listener's own", except where a default is given.
type Limits struct {
	// MinWorkers and MaxWorkers bound Scaler answers; zero uses State.MinWorkers/MaxWorkers.
	MinWorkers int
	MaxWorkers int
	// MinDelay and MaxDelay bound Backoff delays.
	MinDelay time.Duration
	MaxDelay time.Duration
	// MaxRetryDelay bounds PoisonPolicy retry delays (default queue.MaxVisibility, the
	// listener's own cap).
	MaxRetryDelay time.Duration
	// MaxReasonLen truncates dead-letter reasons (default DefaultMaxReasonLen bytes).
	MaxReasonLen int
}

// Config describes one plugin process.
type Config struct {
	// Path is the plugin binary.
	Path string
	// Args are passed to the binary.
	Args []string
	// Env ("KEY=value") is added to the host's environment for the plugin.
	Env []string
	// CallTimeout bounds every policy call (default DefaultCallTimeout).
	CallTimeout time.Duration
	// StartTimeout bounds the handshake and capability discovery (default DefaultStartTimeout).
	StartTimeout time.Duration
	// HealthInterval is how often a running plugin is pinged (default DefaultHealthInterval).
	HealthInterval time.Duration
	// RestartMin and RestartMax bound the doubling wait before each restart attempt.
	RestartMin time.Duration
	RestartMax time.Duration
	// MaxRestarts is how many consecutive failed restart attempts turn the plugin "failed"
	// (fallback only, until Reload). Zero retries for ever.
	MaxRestarts int
	// MaxTimeouts is how many consecutive calls may pass CallTimeout before the plugin is
	// presumed hung and restarted (default DefaultMaxTimeouts; negative never restarts).
	MaxTimeouts int
	// Limits clamp the plugin's answers.
	Limits Limits
	// Logger receives the supervisor's events and the plugin's stderr (default slog.Default()).
	Logger *slog.Logger
	// Clock drives restart back-off and health checks (default the real clock). Tests of a
	// real plugin process, which testing/synctest cannot hold, step a fake one.
	Clock clock.Clock
}

func (c Config) withDefaults() Config {
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.HealthInterval <= 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	if c.RestartMin <= 0 {
		c.RestartMin = DefaultRestartMin
	}
	if c.RestartMax < c.RestartMin {
		c.RestartMax = max(DefaultRestartMax, c.RestartMin)
	}
	if c.MaxTimeouts == 0 {
		c.MaxTimeouts = DefaultMaxTimeouts
	}
	if c.Limits.MaxRetryDelay <= 0 {
		c.Limits.MaxRetryDelay = queue.MaxVisibility
	}
	if c.Limits.MaxReasonLen <= 0 {
		c.Limits.MaxReasonLen = DefaultMaxReasonLen
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return c
}
