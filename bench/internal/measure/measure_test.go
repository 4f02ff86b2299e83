package measure

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	l := NewLatencies(100)
	for i := 100; i >= 1; i-- { // out of order on purpose
		l.Add(time.Duration(i) * time.Millisecond)
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {0.1, time.Millisecond}}
	for _, tc := range tests {
		if got := l.Percentile(tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := NewLatencies(0).Percentile(50); got != 0 {
		t.Errorf("empty p50 = %v, want 0", got)
	}
}

func TestReadUsageSeesWork(t *testing.T) {
	before := ReadUsage()
	start := time.Now()
	x := 0
	for time.Since(start) < 50*time.Millisecond {
		x++
	}
	w := Since(before, start)
	if w.CPU <= 0 || w.RSS <= 0 {
		t.Fatalf("after a busy loop: CPU %v, RSS %d; want both > 0", w.CPU, w.RSS)
	}
	if w.CPUPercent() <= 0 {
		t.Fatalf("CPUPercent = %v", w.CPUPercent())
	}
	_ = x
}
