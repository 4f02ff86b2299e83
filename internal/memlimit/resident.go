package memlimit

import (
	"bytes"
	"os"
	"strconv"
)

// Resident is this process's resident memory in bytes, from /proc/self/statm; 0 if unknown.
func Resident() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// ResetPeak resets the kernel's high-water mark of this process's resident memory (VmHWM)
// to what it is now; false where that is not allowed.
func ResetPeak() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// Peak is the high-water mark of this process's resident memory (VmHWM, from
// /proc/self/status) in bytes; 0 if unknown.
func Peak() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			if f := bytes.Fields(v); len(f) >= 1 {
				if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
