package runtime

import (
	"fmt"
	"reflect"
	goruntime "runtime"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// The linear memory of a pooled instance lives outside the Go heap, in an anonymous mapping
// of its own reserved at the memory's maximum (the tenant's memory limit, or less where the
// module declares less), which the kernel commits page by page as the guest touches it.
//
// Why: wazero's default grows a memory by appending to a Go slice. Each memory.grow past the
// slice's capacity copies the memory into a new slice and leaves the old one as garbage,
// which the collector frees only after the heap has doubled (GOGC). A guest growing its
// memory a page at a time up to the 128 MiB default left the host at 552 MB resident, and
// under a 1 GiB limit at 3.9 GB: one tenant's memory bomb cost several times its limit. A
// mapping grows in place, with no copy and no garbage, and its pages go back to the kernel
// when the instance closes rather than when the collector next runs.
//
// Releasing takes two steps, because guest code can still run on a memory wazero has
// freed: a module closed with a call in flight (close-on-context-done; a runtime closed
// around a start function abandoned still running, bounded.go) goes on until it reaches its
// next check. So Free only drops the pages (MADV_DONTNEED: the guest reads zeros there from
// then on, and what it writes is thrown away later), and the mapping itself is unmapped by a
// cleanup once the module instance is unreachable. A running call's goroutine holds its
// instance, so no call can be running by then. Host functions copy out what they keep of
// guest memory (outputs, HTTP request bodies), so no Go slice into a mapping outlives its
// call either.
//
// Bounds: each mapping is one of the kernel's memory areas for the process
// (vm.max_map_count, 65,530 by default), which the Go runtime needs too, so an engine maps
// at most a quarter of that many memories at once. Each also reserves its maximum in address
// space, which the Go runtime needs as well: where the host runs under an address-space
// limit (RLIMIT_AS, ulimit -v), 16 warm instances under a 1 GiB memory limit reserved 16 GiB
// and the host, unable to grow its heap past 1 GB under a 12 GB limit, died with "fatal
// error: out of memory". So an engine's mappings also reserve at most a quarter of the
// address space the process had left when the engine started: of the user address space
// (2^47 bytes on amd64, as little as 2^39 on some arm64 kernels) and of RLIMIT_AS. Past
// either bound, or where mmap fails (a strict overcommit policy), an instance's memory is a
// Go slice again, grown by doubling.

// guestMemories counts an engine's mapped guest memories against its bound.
type guestMemories struct {
	live atomic.Int64
	max  int64 // 0: never map (the platform has no mapping)
	// reserved is the address space the live mappings reserve, at most maxBytes.
	reserved atomic.Int64
	maxBytes int64
}

// instanceMemory allocates the memories of one instantiation: wazero calls Allocate from
// InstantiateModule; settle is called once that returned.
//
// The memory limit is enforced here, not by wazero: the tenant's runtime lets a memory
// without a declared maximum grow to the wasm32 maximum as far as wazero knows
// (Tenant.runtime), so that every memory.grow past the limit reaches Reallocate, which
// refuses it (memory.grow returns -1) and counts the refusal in refused. Had wazero refused
// it, nothing would say so, and a failed call could only be guessed to have run out of
// memory from how large its memory was: an unreachable trap at the limit read as "exceeded
// its memory limit".
type instanceMemory struct {
	g      *guestMemories
	limit  uint64        // the tenant's memory limit in bytes; 0: wazero's maximum only
	refuse *atomic.Int64 // counts refused growths; may be nil
	mapped []*mappedMemory
	// budget is the tenant's memory budget, which each memory reserves from as it grows;
	// what names the instance in a refusal.
	budget *memBudget
	what   string
	// budgetRefusal is the budget's last refusal of a memory.grow (or of the initial pages).
	budgetRefusal atomic.Pointer[BudgetError]
	// forced: initial pages were taken past the budget.
	forced atomic.Bool
	// budgeted are the memories that reserve from budget.
	budgeted []*budgetedMemory
	// kernels are the instance's Extism kernel memories (extism_kernel.go), released with
	// its guest memories.
	kernels []*kernelMemory
}

// Allocate implements experimental.MemoryAllocator.
func (im *instanceMemory) Allocate(capBytes, maxBytes uint64) experimental.LinearMemory {
	if im.limit > 0 && maxBytes > im.limit {
		// Never below the declared minimum, which wazero takes at once: Tenant.compile
		// refuses a module declaring more than the limit.
		maxBytes = max(im.limit, capBytes)
	}
	var m experimental.LinearMemory = &sliceMemory{max: maxBytes, refused: im.refuse}
	if mm := im.g.mapMemory(maxBytes); mm != nil {
		mm.refused = im.refuse
		im.mapped = append(im.mapped, mm)
		m = mm
	}
	if im.budget == nil {
		return m
	}
	bm := &budgetedMemory{LinearMemory: m, im: im, max: maxBytes}
	im.budgeted = append(im.budgeted, bm)
	return bm
}

// overdrawn returns the refusal of a memory's initial pages, which wazero gives no way to
// refuse: they are taken and counted, and the instantiation must then fail.
func (im *instanceMemory) overdrawn() *BudgetError {
	if im == nil || !im.forced.Load() {
		return nil
	}
	return im.budgetRefusal.Load()
}

// takeRefusal returns and forgets the budget's refusal of a growth since the last call
// began (forgetRefusal).
func (im *instanceMemory) takeRefusal() *BudgetError {
	if im == nil {
		return nil
	}
	return im.budgetRefusal.Swap(nil)
}

// forgetRefusal drops a refusal an earlier call coped with (its guest saw memory.grow
// return -1 and returned a status): only a refusal in the call that failed explains it, and
// a stale one made a later call's unrelated trap read as the budget's. A load first: the
// common case stores nothing.
func (im *instanceMemory) forgetRefusal() {
	if im != nil && im.budgetRefusal.Load() != nil {
		im.budgetRefusal.Store(nil)
	}
}

// budgetedMemory reserves a memory's pages from its tenant's budget as it grows and releases
// them when it is freed. A growth the budget refuses is a refused memory.grow: the guest
// sees -1, as at its memory limit, and a call that fails then says the budget refused it.
type budgetedMemory struct {
	experimental.LinearMemory
	im  *instanceMemory
	max uint64 // the memory's maximum: a growth past it is the limit's to refuse

	mu      sync.Mutex
	held    int64 // reserved
	started bool  // the initial pages are taken
	freed   bool
}

// Reallocate implements experimental.LinearMemory.
func (m *budgetedMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := int64(size) - m.held
	if size > m.max {
		// The memory limit's refusal (counted there), not the budget's.
		return m.LinearMemory.Reallocate(size)
	}
	if n > 0 && !m.freed {
		if err := m.im.budget.reserve(ConsumerInstances, n, m.im.what); err != nil {
			be := err.(*BudgetError)
			m.im.budgetRefusal.Store(be)
			if m.started {
				return nil
			}
			m.im.forced.Store(true)
			m.im.budget.force(ConsumerInstances, n)
		}
		m.held += n
	}
	m.started = true
	b := m.LinearMemory.Reallocate(size)
	if b == nil && n > 0 && !m.freed {
		m.im.budget.release(ConsumerInstances, n)
		m.held -= n
	}
	return b
}

// Free implements experimental.LinearMemory: the pages go, and their reservation.
func (m *budgetedMemory) Free() {
	m.LinearMemory.Free()
	m.release()
}

// release gives the memory's reservation back, once.
func (m *budgetedMemory) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.freed {
		m.freed = true
		m.im.budget.release(ConsumerInstances, m.held)
		m.held = 0
	}
}

// settle arranges for the instantiation's mappings to be unmapped: at once when it made no
// instance (mod nil; nothing runs on them once InstantiateModule has returned), otherwise
// once mod is unreachable.
//
// Budget reservations go with them: a memory whose module was never closed (a failed
// instantiation) gives its reservation back here, Free being idempotent.
func (im *instanceMemory) settle(mod api.Module) {
	if len(im.mapped) == 0 && len(im.budgeted) == 0 && len(im.kernels) == 0 {
		return
	}
	r := released{mapped: im.mapped, budgeted: im.budgeted, kernels: im.kernels}
	im.mapped, im.budgeted, im.kernels = nil, nil, nil
	v := reflect.ValueOf(mod)
	if mod == nil || v.Kind() != reflect.Pointer || v.IsNil() {
		if mod != nil {
			// Not wazero's *ModuleInstance: nothing to tie the mapping's life to. Unreachable
			// with the wazero this module builds with (TestGuestMemoryUnmappedWhenUnreachable).
			return
		}
		r.release()
		return
	}
	goruntime.AddCleanup((*byte)(v.UnsafePointer()), released.release, r)
}

// released is what settle gives back once nothing can run on it.
type released struct {
	mapped   []*mappedMemory
	budgeted []*budgetedMemory
	kernels  []*kernelMemory
}

func (r released) release() {
	for _, m := range r.budgeted {
		m.release()
	}
	for _, k := range r.kernels {
		k.unmap()
	}
	for _, m := range r.mapped {
		m.unmap()
	}
}

// sliceMemory is a linear memory in a Go slice, grown by doubling: the fallback when no
// mapping can be had. It leaves at most as much garbage as the memory's size behind.
type sliceMemory struct {
	buf     []byte
	max     uint64
	refused *atomic.Int64 // counts refused growths; may be nil
}

// Reallocate implements experimental.LinearMemory.
func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		countRefusal(m.refused)
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	grown := make([]byte, size, min(m.max, max(size, 2*uint64(cap(m.buf)))))
	copy(grown, m.buf)
	m.buf = grown
	return grown
}

// Free implements experimental.LinearMemory.
func (m *sliceMemory) Free() { m.buf = nil }

// countRefusal records a memory.grow refused at the memory limit.
func countRefusal(n *atomic.Int64) {
	if n != nil {
		n.Add(1)
	}
}

// wasmMaxPages is the most pages a wasm32 memory can have (4 GiB).
const wasmMaxPages = 65536

// checkDeclaredMemory refuses a module whose memory declares a minimum or maximum above
// the tenant's memory limit, in wazero's words: the tenant's runtime leaves the limit to
// the memory allocator (instanceMemory), so wazero no longer checks it.
func (t *Tenant) checkDeclaredMemory(cm wazero.CompiledModule) error {
	limit := t.limits.MemoryPages
	defs := cm.ImportedMemories()
	for _, d := range cm.ExportedMemories() {
		defs = append(defs, d)
	}
	for _, d := range defs {
		if mx, ok := d.Max(); ok && mx > limit {
			return fmt.Errorf("section memory: max %d pages (%s) over limit of %d pages (%s)", mx, pagesText(mx), limit, pagesText(limit))
		}
		if d.Min() > limit {
			return fmt.Errorf("section memory: min %d pages (%s) over limit of %d pages (%s)", d.Min(), pagesText(d.Min()), limit, pagesText(limit))
		}
	}
	return nil
}

// pagesText is a page count in bytes as wazero words it (64 Ki, 2 Mi, 4 Gi).
func pagesText(pages uint32) string {
	k := uint64(pages) * 64
	switch {
	case k < 1024:
		return fmt.Sprintf("%d Ki", k)
	case k < 1024*1024:
		return fmt.Sprintf("%d Mi", k/1024)
	}
	return fmt.Sprintf("%d Gi", k/1024/1024)
}
