package external

import (
	"fmt"
	"os"
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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name, which may itself hold spaces: state is
	// field 3, utime and stime fields 14 and 15, in clock ticks (USER_HZ, 100 on Linux).
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(fields))
	}
	for _, f := range fields[11:13] {
		ticks, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		total += time.Duration(ticks) * (time.Second / 100)
	}
	return total, nil
}
