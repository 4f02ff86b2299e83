// Package memlimit finds the memory a process may use — its cgroup's limit, or the
// machine's memory where it has none — and the share of it a host budgets for its large
// consumers, leaving the rest as headroom for the Go runtime and everything not budgeted.
package memlimit

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
)

// Source says where a limit came from.
type Source string

// The sources of a limit.
const (
	SourceCgroupV2 Source = "cgroup v2 memory.max"
	SourceCgroupV1 Source = "cgroup v1 memory.limit_in_bytes"
	SourceMachine  Source = "physical memory (no cgroup limit)"
	SourceUnknown  Source = "unknown"
)

// MinHeadroom is the least a budget leaves out of a limit: the Go runtime, the queue
// store, in-flight messages and everything else not reserved from the budget.
const MinHeadroom = 128 << 20

// Budget is the part of limit a host reserves its large consumers from: limit less a fifth
// of it, and less at least MinHeadroom; never below a quarter of limit.
func Budget(limit int64) int64 {
	if limit <= 0 {
		return 0
	}
	return max(limit-max(limit/5, MinHeadroom), limit/4)
}

// Detect returns the memory this process may use and where that came from: the smallest
// limit of its memory cgroup and the cgroup's ancestors (v2, or v1's memory controller), or
// else the machine's memory. 0 and SourceUnknown when nothing can be read.
func Detect() (int64, Source) {
	return detect("/proc/self/cgroup", "/sys/fs/cgroup", "/proc/meminfo")
}

func detect(selfCgroup, root, meminfo string) (int64, Source) {
	if b, err := os.ReadFile(selfCgroup); err == nil {
		for line := range strings.Lines(string(b)) {
			// hierarchy-ID:controller-list:cgroup-path
			f := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(f) != 3 {
				continue
			}
			switch {
			case f[0] == "0" && f[1] == "":
				if n := smallest(root, f[2], "memory.max"); n > 0 {
					return n, SourceCgroupV2
				}
			case hasController(f[1], "memory"):
				if n := smallest(path.Join(root, "memory"), f[2], "memory.limit_in_bytes"); n > 0 {
					return n, SourceCgroupV1
				}
			}
		}
	}
	if n := machineMemory(meminfo); n > 0 {
		return n, SourceMachine
	}
	return 0, SourceUnknown
}

func hasController(list, c string) bool {
	for x := range strings.SplitSeq(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// smallest is the smallest limit in file along the cgroup path from mount down to cg, the
// mount's own included (a container sees its own cgroup mounted at the root, under a path
// naming the host's hierarchy); 0 for none. A limit at or above 2^62 ("max", v1's
// unlimited page-rounded maximum) is none.
func smallest(mount, cg, file string) int64 {
	var best int64
	try := func(dir string) {
		b, err := os.ReadFile(path.Join(dir, file))
		if err != nil {
			return
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 {
			return
		}
		if best == 0 || n < best {
			best = n
		}
	}
	try(mount)
	for p := path.Clean("/" + cg); p != "/"; p = path.Dir(p) {
		try(path.Join(mount, p))
	}
	return best
}

// machineMemory is MemTotal from meminfo, in bytes; 0 if unknown.
func machineMemory(meminfo string) int64 {
	f, err := os.Open(meminfo)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "MemTotal:"); ok {
			fields := strings.Fields(v)
			if len(fields) >= 1 {
				if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}
