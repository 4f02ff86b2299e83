package external

import "time"

// Clock is the time source of the supervisor (restart back-off, health checks). Tests inject
// a fake one; nil means the real clock.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// restartDelay is the wait before restart attempt n (0-based): doubling from min, capped
// at max.
func restartDelay(n int, minDelay, maxDelay time.Duration) time.Duration {
	d := minDelay
	for i := 0; i < n && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}
