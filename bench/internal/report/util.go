package report

import (
	"fmt"
	"strconv"
	"time"
)

func parseFloat(s string, v *float64) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err == nil {
		*v = f
	}
	return f, err
}

// ns formats a nanosecond figure with a readable unit.
func ns(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f ms", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2f µs", v/1e3)
	default:
		return fmt.Sprintf("%.1f ns", v)
	}
}

// dur formats a latency.
func dur(d time.Duration) string { return ns(float64(d.Nanoseconds())) }

// ratio formats a times-faster figure.
func ratio(x float64) string {
	switch {
	case x == 0:
		return "n/a"
	case x >= 100:
		return fmt.Sprintf("%.0f×", x)
	case x >= 10:
		return fmt.Sprintf("%.1f×", x)
	default:
		return fmt.Sprintf("%.2f×", x)
	}
}

func size(b int) string {
	switch {
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	default:
		return fmt.Sprintf("%d B", b)
	}
}
