//go:build !linux

package runtime

import "sync/atomic"

// newGuestMemories maps no memories off Linux: guest memories are Go slices (sliceMemory).
func newGuestMemories() *guestMemories { return &guestMemories{} }

// mappedMemory is Linux only (guestmem_linux.go).
type mappedMemory struct{ refused *atomic.Int64 }

func (g *guestMemories) mapMemory(uint64) *mappedMemory { return nil }

func (m *mappedMemory) Reallocate(uint64) []byte { return nil }
func (m *mappedMemory) Free()                    {}
func (m *mappedMemory) unmap()                   {}
func (m *mappedMemory) bytes() []byte            { return nil }

func dropPages([]byte) {}
