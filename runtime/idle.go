package runtime

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Idle instances. A pool with PoolConfig.IdleTimeout closes instances nobody used for that
// long, down to MinInstances, so a binding without work holds no instance and no guest
// memory; its next message instantiates one. One janitor goroutine per engine reaps every
// such pool, and runs only while one exists.

// Bounds of the janitor's tick, a quarter of the shortest idle timeout.
const (
	minJanitorTick = 5 * time.Millisecond
	maxJanitorTick = time.Second
)

// janitor is the engine's reaper of idle instances.
type janitor struct {
	// now is the engine's clock (Engine.since) at the last tick: a pool stamps an instance
	// with it when the instance goes idle, one atomic load rather than a clock read per call.
	now atomic.Int64

	mu      sync.Mutex
	pools   map[*Pool]struct{}
	running bool
	stopped bool
	stop    chan struct{}  // closed by Engine.Close
	wg      sync.WaitGroup // the running reapLoop
}

// watchIdle starts reaping p's idle instances.
func (e *Engine) watchIdle(p *Pool) {
	j := &e.idle
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stopped {
		return
	}
	j.pools[p] = struct{}{}
	if !j.running {
		j.running = true
		j.now.Store(int64(e.since()))
		j.wg.Add(1)
		go e.reapLoop()
	}
}

// close stops the janitor and waits for it: the runtimes under its pools close next.
func (j *janitor) close() {
	j.mu.Lock()
	j.stopped = true
	close(j.stop)
	j.mu.Unlock()
	j.wg.Wait()
}

// unwatchIdle stops reaping p (it is closing).
func (e *Engine) unwatchIdle(p *Pool) {
	j := &e.idle
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.pools, p)
}

func (e *Engine) reapLoop() {
	j := &e.idle
	defer j.wg.Done()
	for {
		j.mu.Lock()
		if len(j.pools) == 0 {
			j.running = false
			j.mu.Unlock()
			return
		}
		tick := maxJanitorTick
		pools := make([]*Pool, 0, len(j.pools))
		for p := range j.pools {
			tick = min(tick, p.cfg.IdleTimeout/4)
			pools = append(pools, p)
		}
		j.mu.Unlock()
		t := time.NewTimer(max(tick, minJanitorTick))
		select {
		case <-j.stop:
			t.Stop()
			return
		case <-t.C:
		}
		now := e.since()
		j.now.Store(int64(now))
		for _, p := range pools {
			p.reapIdle(now)
		}
	}
}

// reapIdle closes the instances idle since before now-IdleTimeout, keeping MinInstances.
func (p *Pool) reapIdle(now time.Duration) {
	// Close waits for a reap in progress before it drains and releases the compiled code.
	p.reapMu.Lock()
	defer p.reapMu.Unlock()
	if p.closed.Load() {
		return
	}
	for _, inst := range p.slots.reap(now-p.cfg.IdleTimeout, p.cfg.MinInstances, &p.total) {
		inst.close(context.Background())
	}
}

// reap removes and returns the idle instances that went idle at or before cutoff, oldest
// first, as long as more than keep instances (total, idle or busy) remain.
func (s *slots) reap(cutoff time.Duration, keep int, total *atomic.Int64) []*instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unparkLocked() // a pool left alone keeps its last instance parked: it ages like the others
	n, k := int(total.Load()), 0
	// release appends and acquire takes from the end: the front has been idle longest.
	for k < len(s.idle) && n > keep && s.idle[k].idleAt <= cutoff {
		k++
		n--
	}
	if k == 0 {
		return nil
	}
	victims := slices.Clone(s.idle[:k])
	clear(s.idle[:k])
	s.idle = append(s.idle[:0], s.idle[k:]...)
	total.Add(-int64(k))
	return victims
}
