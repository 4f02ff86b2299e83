package runtime

import (
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// newGuestMemories bounds the engine's mapped memories to a quarter of vm.max_map_count, and
// the address space they reserve to a quarter of what the process has left (guestmem.go).
func newGuestMemories() *guestMemories {
	n := int64(65530)
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 {
			n = v
		}
	}
	var lim syscall.Rlimit
	asLimit := uint64(math.MaxUint64)
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		asLimit = lim.Cur
	}
	return &guestMemories{max: n / 4, maxBytes: reserveBudget(stackStart(), asLimit, vmSize())}
}

// reserveBudget is how much address space an engine's mappings may reserve: a quarter of
// the user address space (the power of two above stack, an address near its top), and, under
// an address-space limit asLimit (RLIM_INFINITY: none), a quarter of what the process's
// used bytes leave of it.
func reserveBudget(stack, asLimit, used uint64) int64 {
	space := uint64(1) << 47 // amd64's; the stack's address tells where it is less (or more)
	if stack > 0 {
		space = 1 << bits.Len64(stack)
	}
	budget := space / 4
	if asLimit != math.MaxUint64 { // RLIM_INFINITY
		budget = min(budget, (asLimit-min(used, asLimit))/4)
	}
	return int64(min(budget, math.MaxInt64))
}

// stackStart is the address of the main thread's stack (/proc/self/stat's startstack), near
// the top of the user address space; 0 when it cannot be read.
func stackStart() uint64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses and may hold anything: state is
	// field 3, startstack field 28.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 26 {
		return 0
	}
	v, _ := strconv.ParseUint(f[25], 10, 64)
	return v
}

// vmSize is the process's address space in use (/proc/self/status VmSize), 0 when unknown.
func vmSize() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// mappedMemory is a linear memory in an anonymous mapping of its maximum size.
type mappedMemory struct {
	g       *guestMemories
	mem     []byte        // the whole mapping
	refused *atomic.Int64 // counts refused growths; may be nil
	once    sync.Once
}

// mapMemory maps a memory of up to size bytes, or returns nil when none may or can be had.
func (g *guestMemories) mapMemory(size uint64) *mappedMemory {
	if size == 0 || size > math.MaxInt {
		return nil
	}
	if g.live.Add(1) > g.max {
		g.live.Add(-1)
		return nil
	}
	if g.reserved.Add(int64(size)) > g.maxBytes {
		g.reserved.Add(-int64(size))
		g.live.Add(-1)
		return nil
	}
	// MAP_NORESERVE: the reservation is address space; the pages the guest touches are
	// what counts, and the memory limit caps those.
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
		g.reserved.Add(-int64(size))
		g.live.Add(-1)
		return nil
	}
	// Where transparent huge pages are on for every mapping (THP "always"), a guest's first
	// touch of a 2 MiB region would commit all of it: a guest using 128 KiB would hold 2 MiB.
	_ = syscall.Madvise(b, syscall.MADV_NOHUGEPAGE)
	return &mappedMemory{g: g, mem: b}
}

// Reallocate implements experimental.LinearMemory: the memory grows in place. Pages past
// the old size were never touched, or were dropped by Free, so they read as zeros, as a
// grown memory must.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.mem)) {
		countRefusal(m.refused)
		return nil
	}
	return m.mem[:size:size]
}

// Free implements experimental.LinearMemory: the pages go back to the kernel; the mapping
// stays until unmap (guestmem.go says why).
func (m *mappedMemory) Free() {
	_ = syscall.Madvise(m.mem, syscall.MADV_DONTNEED)
}

// bytes is the whole mapping.
func (m *mappedMemory) bytes() []byte { return m.mem }

// dropPages gives b's pages back to the kernel (b within a mapping): they read zeros after.
func dropPages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_DONTNEED) }

// unmap releases the mapping; only once nothing can run on it.
func (m *mappedMemory) unmap() {
	m.once.Do(func() {
		if err := syscall.Munmap(m.mem); err == nil {
			m.g.reserved.Add(-int64(len(m.mem)))
			m.g.live.Add(-1)
		}
	})
}
