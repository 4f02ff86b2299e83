package runtime

import (
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// newGuestMemories bounds the engine's mapped memories to a quarter of vm.max_map_count.
func newGuestMemories() *guestMemories {
	n := int64(65530)
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 {
			n = v
		}
	}
	return &guestMemories{max: n / 4}
}

// mappedMemory is a linear memory in an anonymous mapping of its maximum size.
type mappedMemory struct {
	g    *guestMemories
	mem  []byte // the whole mapping
	once sync.Once
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
	// MAP_NORESERVE: the reservation is address space; the pages the guest touches are
	// what counts, and the memory limit caps those.
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
	if err != nil {
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
		return nil
	}
	return m.mem[:size:size]
}

// Free implements experimental.LinearMemory: the pages go back to the kernel; the mapping
// stays until unmap (guestmem.go says why).
func (m *mappedMemory) Free() {
	_ = syscall.Madvise(m.mem, syscall.MADV_DONTNEED)
}

// unmap releases the mapping; only once nothing can run on it.
func (m *mappedMemory) unmap() {
	m.once.Do(func() {
		if err := syscall.Munmap(m.mem); err == nil {
			m.g.live.Add(-1)
		}
	})
}
