package host

import (
	"context"
	"fmt"
	"sync"
)

// runner is the state of Run that config reloads need to start and stop bindings'
// listeners. Its lock is never held while another is taken, nor taken under one but the
// host's reloadMu: Run sets ctx and then starts the bindings serving, and a reload adds a
// binding to the serving set and then starts it, so whichever comes second starts it (start
// is idempotent); a binding a reload stops is marked so that Run does not start it after.
type runner struct {
	mu     sync.Mutex
	ctx    context.Context // nil until Run starts
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   []error
	done   bool // Run is shutting down: no listener starts any more
}

// begin makes ctx the context listeners start under from now on; cancel stops the host.
func (r *runner) begin(ctx context.Context, cancel context.CancelFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx, r.cancel = ctx, cancel
}

// start runs b's listener under Run's context, unless Run has not begun or is shutting
// down, or b is already started or stopped. A listener that fails stops the host (as at
// startup); one stopped by a config reload does not.
func (r *runner) start(b *binding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil || r.done || b.done != nil || b.stopped {
		return
	}
	ctx, cancel := context.WithCancel(r.ctx)
	b.stop, b.done = cancel, make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(b.done)
		v := b.cur.Load()
		b.log.Info("binding started", "queue", b.physical, "module", v.module.Name(), "digest", v.module.Digest()[:12])
		if err := b.lis.Run(ctx); err != nil {
			b.log.Error("binding stopped with an error", "err", err)
			r.fail(fmt.Errorf("tenants.%s.bindings.%s: %w", b.tenant.name, b.name, err))
			return
		}
		b.log.Info("binding stopped")
	}()
}

// fail records err for Run to return and stops the host.
func (r *runner) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
	r.cancel()
}

// stopping marks b stopped, so it is never started from now on, and returns how to stop its
// listener and the channel closed once it has returned: both nil if it never started.
func (r *runner) stopping(b *binding) (stop context.CancelFunc, done <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b.stopped = true
	return b.stop, b.done
}

// finish starts no listener any more, waits for those running to return and returns the
// errors Run reports.
func (r *runner) finish() []error {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs
}
