package builtin

import (
	"fmt"
	"strings"

	"github.com/wqhost/wqhost/internal/defaults"
	"github.com/wqhost/wqhost/listener"
)

// Names of the built-in policies, as written in config.
const (
	BackoffRandomExponential  = defaults.BackoffRandomExponential  // "random-exponential"
	ScalerDepthTable          = defaults.ScalerDepthTable          // "depth-table"
	ScalerTarget              = defaults.ScalerTarget              // "target"
	PoisonRetryThenDeadLetter = defaults.PoisonRetryThenDeadLetter // "retry-then-dead-letter"
)

// Default policy names, used when config names none.
const (
	DefaultBackoffName = defaults.BackoffName // BackoffRandomExponential
	DefaultScalerName  = defaults.ScalerName  // ScalerTarget
	DefaultPoisonName  = defaults.PoisonName  // PoisonRetryThenDeadLetter
)

// BackoffNames returns the names NewBackoffNamed accepts.
func BackoffNames() []string { return defaults.BackoffNames() }

// ScalerNames returns the names NewScalerNamed accepts.
func ScalerNames() []string { return defaults.ScalerNames() }

// PoisonNames returns the names NewPoisonNamed accepts.
func PoisonNames() []string { return defaults.PoisonNames() }

// ScalerOptions configure the scaler chosen by name; each scaler reads its own field.
type ScalerOptions struct {
	// Table is the depth-table scaler's thresholds (nil: the whitepaper's). It is checked
	// with CheckDepthRows.
	Table []DepthRow
	// TargetPerWorker is the target scaler's depth per worker (0: DefaultTargetPerWorker).
	TargetPerWorker int64
}

// NewBackoffNamed returns the built-in back-off called name ("" means DefaultBackoffName).
func NewBackoffNamed(name string, o BackoffOptions) (listener.Backoff, error) {
	switch name {
	case "", BackoffRandomExponential:
		if err := o.Validate(); err != nil {
			return nil, fmt.Errorf("back-off %q: %w", BackoffRandomExponential, err)
		}
		return NewBackoff(o), nil
	}
	return nil, unknown("back-off", name, BackoffNames())
}

// NewScalerNamed returns the built-in scaler called name ("" means DefaultScalerName).
func NewScalerNamed(name string, o ScalerOptions) (listener.Scaler, error) {
	switch name {
	case ScalerDepthTable:
		if err := CheckDepthRows(o.Table); err != nil {
			return nil, fmt.Errorf("scaler %q: %w", name, err)
		}
		return NewDepthTable(o.Table), nil
	case "", ScalerTarget:
		if o.TargetPerWorker < 0 {
			return nil, fmt.Errorf("scaler %q: target per worker %d is negative", ScalerTarget, o.TargetPerWorker)
		}
		return NewTarget(o.TargetPerWorker), nil
	}
	return nil, unknown("scaler", name, ScalerNames())
}

// NewPoisonNamed returns the built-in poison policy called name ("" means
// DefaultPoisonName).
func NewPoisonNamed(name string, o PoisonOptions) (listener.PoisonPolicy, error) {
	switch name {
	case "", PoisonRetryThenDeadLetter:
		if err := o.Validate(); err != nil {
			return nil, fmt.Errorf("poison policy %q: %w", PoisonRetryThenDeadLetter, err)
		}
		return NewPoison(o), nil
	}
	return nil, unknown("poison policy", name, PoisonNames())
}

func unknown(kind, name string, valid []string) error {
	return fmt.Errorf("unknown built-in %s %q (valid: %s)", kind, name, strings.Join(valid, ", "))
}
