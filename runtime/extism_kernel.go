package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sync"
)

// The Extism kernel's memory (extism.go): one instance's blocks and their records, held
// where they cost the host what the plugin holds and no more.
//
// Why: the kernel memory was a Go slice grown by append, each growth a copy that left the
// old one as garbage until the collector's next cycle, beside a slice of block records grown
// the same way. A plugin allocating 1 MiB blocks up to its 128 MiB limit left the host at
// 542 MB resident (3.7 GB at a 1 GiB limit, the call 5.8 s past its time limit, copying);
// 1-byte blocks, 456 MB.
//
// So the kernel memory is one anonymous mapping reserved at the limit, taken from the same
// machinery and bounds as guest memories (guestmem_linux.go): the blocks grow up from its
// bottom, their records (extismBlockRecord bytes each, in offset order) down from its top,
// and the two meeting is the limit, so records count against it with no separate cap. It
// grows in place: no copy, no garbage, and only the pages touched are resident. Where no
// mapping may be had it is a Go slice grown by doubling (the records moved to its new top),
// at most its own size in garbage.
//
// What it holds it reserves from the tenant's memory budget (ConsumerKernel), in
// kernelChunk steps, before taking it: the blocks up to the highest byte handed out since
// the pages were last dropped, the records up to their most. A refused reservation makes
// alloc trap as at the limit, the trap wrapping the *BudgetError. The reservation shrinks
// when the pages go: at the end of each call past extismKeepBytes, during a call once the
// blocks freed at the top leave kernelDropBytes unused, and all of it when the instance
// closes.
//
// Guest code can still run after an instance is closed (guestmem.go), and it reaches the
// kernel memory through host functions: so closing only drops the pages (MADV_DONTNEED) and
// gives the reservation back; the mapping is unmapped with the instance's guest memories
// once the module instance is unreachable (instanceMemory.settle), when no call can run.

const (
	// kernelChunk is the step the budget reservation grows in: one reservation per 64 KiB
	// of growth rather than per block.
	kernelChunk = 64 << 10
	// kernelDropBytes is how much unused memory above the blocks a call keeps before the
	// pages are dropped: a plugin that frees a large block gives it back at once, one that
	// allocates and frees a small block in a loop does not pay a system call each time.
	kernelDropBytes = 8 << 20
	// kernelSliceStart is the first size of a kernel memory held in a Go slice.
	kernelSliceStart = 4096
)

// kernelMemory is the storage of one instance's kernel memory: buf[0:top) are the blocks,
// and record i (in offset order) is the extismBlockRecord bytes ending at
// len(buf) - i*extismBlockRecord.
type kernelMemory struct {
	buf    []byte
	mm     *mappedMemory // nil: buf is a Go slice
	limit  int           // the most bytes blocks and records may take together
	top    int           // end of the last block
	n      int           // records
	dirty  int           // buf[dirty:limit-recordsHW) reads zeros: never touched, or dropped
	recsHW int           // the most bytes records took since their pages were last dropped

	budget *memBudget
	what   string
	mu     sync.Mutex // guards held and closed: close may come from another goroutine
	held   int64      // reserved from budget
	closed bool
}

// pageUp rounds n up to the system's page size.
func pageUp(n int) int {
	p := os.Getpagesize()
	return (n + p - 1) &^ (p - 1)
}

// newKernelMemory makes a kernel memory of up to limit bytes, mapped where g allows.
func newKernelMemory(g *guestMemories, limit int, budget *memBudget, what string) *kernelMemory {
	// Page-aligned, so that the records' pages are the mapping's last ones.
	limit &^= kernelChunk - 1
	k := &kernelMemory{limit: limit, top: extismBase, dirty: extismBase, budget: budget, what: what}
	if g != nil {
		k.mm = g.mapMemory(uint64(limit))
	}
	if k.mm != nil {
		k.buf = k.mm.bytes()
	} else {
		k.buf = make([]byte, min(kernelSliceStart, max(limit, extismBase)))
	}
	return k
}

// want is what the memory's present state should have reserved: with blocks up to dirty and
// records taking recs bytes.
func (k *kernelMemory) want(dirty, recs int) int64 {
	if k.mm == nil {
		return int64(len(k.buf))
	}
	up := func(n int) int { return (n + kernelChunk - 1) &^ (kernelChunk - 1) }
	return int64(min(k.limit, up(dirty)+up(recs)))
}

// reserve reserves up to want from the budget; it fails with the budget's refusal.
func (k *kernelMemory) reserve(want int64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return fmt.Errorf("kernel memory of %s: the instance is closed", k.what)
	}
	if want > k.held {
		if err := k.budget.reserve(ConsumerKernel, want-k.held, k.what); err != nil {
			return err
		}
		k.held = want
	}
	return nil
}

// settle releases what the memory holds past want.
func (k *kernelMemory) settle(want int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.closed && k.held > want {
		k.budget.release(ConsumerKernel, k.held-want)
		k.held = want
	}
}

// close drops the pages and gives the whole reservation back (the mapping stays until
// unmap); idempotent, and safe beside a host function still running on the memory.
func (k *kernelMemory) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.closed = true
	k.budget.release(ConsumerKernel, k.held)
	k.held = 0
	if k.mm != nil {
		k.mm.Free()
	}
}

// unmap closes the memory and releases its mapping: only once nothing can run on it.
func (k *kernelMemory) unmap() {
	k.close()
	if k.mm != nil {
		k.mm.unmap()
	}
}

// grow makes room for blocks up to end and n records, reserving them first. The caller
// then zeroes the block (clean) and notes the new marks (mark).
func (k *kernelMemory) grow(ctx context.Context, st *callState, end, n int) error {
	recs := n * extismBlockRecord
	if k.mm != nil {
		return k.reserve(k.want(max(k.dirty, end), max(k.recsHW, recs)))
	}
	if end+recs <= len(k.buf) {
		return nil
	}
	size := min(k.limit, max(end+recs, 2*len(k.buf)))
	if err := k.reserve(int64(size)); err != nil {
		return err
	}
	grown := make([]byte, size)
	st.copyOut(ctx, grown[:k.top], k.buf[:k.top])
	old := k.n * extismBlockRecord
	st.copyOut(ctx, grown[size-old:], k.buf[len(k.buf)-old:])
	k.buf = grown
	k.dirty, k.recsHW = k.top, old // past them, grown reads zeros
	return nil
}

// clean zeroes what of buf[off:end) may not read zeros, charging the work.
func (k *kernelMemory) clean(ctx context.Context, st *callState, off, end int) {
	st.zero(ctx, k.buf[off:max(off, min(end, k.dirty))])
	if low := len(k.buf) - k.recsHW; end > low {
		st.zero(ctx, k.buf[max(off, low):end])
	}
}

// mark notes blocks up to end and the records as they are now.
func (k *kernelMemory) mark(end int) {
	k.dirty = max(k.dirty, end)
	k.recsHW = max(k.recsHW, k.n*extismBlockRecord)
}

// shrink drops the pages between the blocks (or the first keep bytes) and the records (or
// the last keep/16 bytes), and releases their reservation. A Go slice is replaced by a small
// one when it holds no block.
func (k *kernelMemory) shrink(keep int) {
	if k.mm == nil {
		if len(k.buf) > keep && k.n == 0 {
			k.buf = make([]byte, min(kernelSliceStart, len(k.buf)))
			k.top, k.dirty, k.recsHW = extismBase, extismBase, 0
			k.settle(k.want(k.dirty, k.recsHW))
		}
		return
	}
	start := pageUp(max(k.top, keep))
	end := (len(k.buf) - max(k.n*extismBlockRecord, keep/16)) &^ (os.Getpagesize() - 1)
	if start >= end || k.dirty <= start && len(k.buf)-k.recsHW >= end {
		return // nothing there to drop
	}
	dropPages(k.buf[start:end])
	if k.dirty > start || len(k.buf)-k.recsHW < start {
		// Old records between the blocks and start were not dropped: zeroed when reused.
		k.dirty = start
	}
	k.recsHW = min(k.recsHW, len(k.buf)-end)
	k.settle(k.want(k.dirty, k.recsHW))
}

// The records: offset, size and flags (bit 0: free), little-endian uint32s.
func (k *kernelMemory) rec(i int) []byte {
	end := len(k.buf) - i*extismBlockRecord
	return k.buf[end-extismBlockRecord : end]
}

func (k *kernelMemory) off(i int) int     { return int(binary.LittleEndian.Uint32(k.rec(i))) }
func (k *kernelMemory) size(i int) int    { return int(binary.LittleEndian.Uint32(k.rec(i)[4:])) }
func (k *kernelMemory) isFree(i int) bool { return k.rec(i)[8]&1 != 0 }

func (k *kernelMemory) set(i, off, size int, free bool) {
	r := k.rec(i)
	binary.LittleEndian.PutUint32(r, uint32(off))
	binary.LittleEndian.PutUint32(r[4:], uint32(size))
	r[8] = 0
	if free {
		r[8] = 1
	}
}

func (k *kernelMemory) setFree(i int, free bool) {
	r := k.rec(i)
	r[8] = 0
	if free {
		r[8] = 1
	}
}

// extent is the bytes block i may use: up to the next block, or its size for the last.
func (k *kernelMemory) extent(i int) int {
	if i+1 < k.n {
		return k.off(i+1) - k.off(i)
	}
	return k.top - k.off(i)
}

// find returns the index of the block at off, or -1.
func (k *kernelMemory) find(off uint64) int {
	if off > math.MaxInt32 {
		return -1
	}
	lo, hi := 0, k.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if uint64(k.off(m)) < off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < k.n && uint64(k.off(lo)) == off {
		return lo
	}
	return -1
}

// moveRecords moves records [i, k.n) to [j, j+k.n-i): a record inserted (j = i+1) or
// deleted (j = i-1). It returns the bytes moved, for the charge.
func (k *kernelMemory) moveRecords(i, j int) int {
	c := k.n - i
	if c <= 0 {
		return 0
	}
	e := len(k.buf)
	copy(k.buf[e-(j+c)*extismBlockRecord:e-j*extismBlockRecord], k.buf[e-(i+c)*extismBlockRecord:e-i*extismBlockRecord])
	return c * extismBlockRecord
}
