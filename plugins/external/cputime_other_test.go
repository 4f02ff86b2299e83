//go:build !linux

package external

import (
	"errors"
	"time"
)

// cpuTime is measured on Linux only; elsewhere the CPU metrics are left out.
func cpuTime(int) (time.Duration, error) {
	return 0, errors.New("CPU time is measured on Linux only")
}
