package external

import "time"

// restartDelay is the wait before restart attempt n (0-based): doubling from min, capped
// at max.
func restartDelay(n int, minDelay, maxDelay time.Duration) time.Duration {
	d := minDelay
	for i := 0; i < n && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}
