package external

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) used so far by this process and, when
// pid > 0, by process pid too: on a shared machine CPU time says what a drain cost even
// when other processes stretch its wall-clock time.
func cpuTime(pid int) (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if pid <= 0 {
		return total, nil
	}
	// /proc/<pid>/stat counts in 10 ms ticks, too coarse for a drain; each thread's
	// schedstat gives its run time in nanoseconds. (Threads that exited are not counted; Go
	// keeps its threads.)
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("no threads of process %d in /proc", pid)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited since the glob
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("%s: empty", t)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}
