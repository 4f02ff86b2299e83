package listener_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
)

// New refuses bad configurations with an error naming the field.
func TestConfigValidation(t *testing.T) {
	e := newMem(t)
	for _, tt := range []struct {
		name string
		edit func(*listener.Config)
		want string
	}{
		{"no queue", func(c *listener.Config) { c.Queue = nil }, "Queue is required"},
		{"no dead letter", func(c *listener.Config) { c.DeadLetter = nil }, "DeadLetter is required"},
		{"no handler", func(c *listener.Config) { c.Handler = nil }, "Handler is required"},
		{"no backoff", func(c *listener.Config) { c.Backoff = nil }, "Backoff is required"},
		{"no scaler", func(c *listener.Config) { c.Scaler = nil }, "Scaler is required"},
		{"no poison", func(c *listener.Config) { c.Poison = nil }, "Poison is required"},
		{"batch too big", func(c *listener.Config) { c.BatchSize = 33 }, "BatchSize: 33 is outside 1..32"},
		{"negative min", func(c *listener.Config) { c.MinWorkers = -1 }, "MinWorkers: -1 is negative"},
		{"max below min", func(c *listener.Config) { c.MinWorkers, c.MaxWorkers = 4, 2 }, "MaxWorkers: 2 is below MinWorkers 4"},
		{"idle bounds inverted", func(c *listener.Config) { c.MinIdle, c.MaxIdle = time.Minute, time.Second }, "MinIdle: 1m0s exceeds MaxIdle 1s"},
		{"negative grace", func(c *listener.Config) { c.ShutdownGrace = -time.Second }, "ShutdownGrace: -1s is negative"},
		{"tiny lease", func(c *listener.Config) { c.VisibilityTimeout = time.Millisecond }, "VisibilityTimeout: 1ms is below 1s"},
		{"pacer with push", func(c *listener.Config) { c.Push, c.IdlePacer = true, stubPacer{} }, "IdlePacer: set with Push"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig(e.q, e.dl)
			tt.edit(&cfg)
			_, err := listener.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v; want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("defaults", func(t *testing.T) {
		l, err := listener.New(baseConfig(e.q, e.dl))
		if err != nil {
			t.Fatal(err)
		}
		if s := l.State(); s.MinWorkers != 1 || s.MaxWorkers != 16 {
			t.Errorf("defaults: min %d max %d, want 1 and 16", s.MinWorkers, s.MaxWorkers)
		}
		cfg := baseConfig(e.q, e.dl)
		cfg.Push = true
		l, err = listener.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s := l.State(); s.MinWorkers != 0 {
			t.Errorf("push default MinWorkers %d, want 0", s.MinWorkers)
		}
	})
}

// stubPacer never grants.
type stubPacer struct{}

func (stubPacer) Enrol() <-chan struct{} { return nil }
func (stubPacer) Withdraw()              {}
func (stubPacer) Found()                 {}
