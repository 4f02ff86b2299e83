// Package clock is the one time source that the parts which cannot run under testing/synctest
// take (they wait on real plugin processes or real network I/O while their own timers must
// be stepped by the test): the Clock interface and the real clock. clocktest holds the one
// fake clock.
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
