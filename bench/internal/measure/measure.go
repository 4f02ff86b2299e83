// Package measure records what a benchmark run reports: per-call latencies and their
// percentiles, and the process's CPU time and resident memory.
package measure

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Latencies collects durations from many goroutines.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// NewLatencies returns a recorder sized for about n samples.
func NewLatencies(n int) *Latencies { return &Latencies{d: make([]time.Duration, 0, n)} }

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Len is the number of samples.
func (l *Latencies) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// Percentile returns the p-th percentile (0 < p <= 100) by nearest rank; 0 with no samples.
func (l *Latencies) Percentile(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	if !slices.IsSorted(l.d) {
		slices.Sort(l.d)
	}
	rank := int(p/100*float64(len(l.d))+0.5) - 1
	return l.d[min(max(rank, 0), len(l.d)-1)]
}

// Usage is the process's resource use at one moment.
type Usage struct {
	User, System time.Duration // CPU time since the process started
	RSS          int64         // resident set size now, bytes
	MaxRSS       int64         // peak resident set size, bytes
}

// CPU is user plus system time.
func (u Usage) CPU() time.Duration { return u.User + u.System }

// ReadUsage reads getrusage(RUSAGE_SELF) and the current RSS from /proc/self/status.
func ReadUsage() Usage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return Usage{
		User:   time.Duration(ru.Utime.Nano()),
		System: time.Duration(ru.Stime.Nano()),
		RSS:    currentRSS(),
		MaxRSS: ru.Maxrss * 1024, // Linux reports KiB
	}
}

func currentRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// Window is the CPU used between two readings, and the RSS at the second.
type Window struct {
	Wall, CPU time.Duration
	RSS       int64
}

// Since measures from start to now.
func Since(start Usage, startWall time.Time) Window {
	now := ReadUsage()
	return Window{Wall: time.Since(startWall), CPU: now.CPU() - start.CPU(), RSS: now.RSS}
}

// CPUPercent is CPU time over wall time, 100 = one core busy.
func (w Window) CPUPercent() float64 {
	if w.Wall <= 0 {
		return 0
	}
	return 100 * float64(w.CPU) / float64(w.Wall)
}
