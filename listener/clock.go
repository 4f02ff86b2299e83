package listener

import "time"

// Clock is the listener's time source. Production uses SystemClock; tests inject a fake or
// run inside a testing/synctest bubble, whose time package is itself a fake clock.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C delivers the time once the timer fired.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it in time.
	Stop() bool
}

// SystemClock returns the Clock of package time.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
