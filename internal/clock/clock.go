// Package clock is the one time source that the parts which cannot run under testing/synctest
// take, so that their timers and lease times can be stepped by a test: the plugin supervisor
// (its tests run real plugin processes), the idle polling budget (its Azurite test does real
// network I/O) and the local and memory queue stores (the backend conformance suite runs its
// cases with t.Run, outside any bubble). It holds the Clock interface and the real clock;
// clocktest holds the one fake clock.
package clock

import "time"

// Clock tells the time and wakes its caller once a duration has passed.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed (at once for d <= 0).
	After(d time.Duration) <-chan time.Time
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }
