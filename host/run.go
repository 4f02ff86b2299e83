package host

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// runner is the state of Run that config reloads need to start and stop bindings'
// listeners. Its lock is never held while another is taken, nor taken under one but the
// host's reloadMu: Run sets ctx and then starts the bindings serving, and a reload adds a
// binding to the serving set and then starts it, so whichever comes second starts it (start
// is idempotent); a binding a reload stops is marked so that Run does not start it after.
//
// No goroutine waits for a binding's listener: an idle one holds none (listener.Start), and
// a listener returns an error only once its context ended (handlers outran the shutdown
// grace), so its end is collected when it is stopped: by finishWithin at shutdown, by
// stopBinding for a reload.
type runner struct {
	mu      sync.Mutex
	ctx     context.Context // nil until Run starts
	cancel  context.CancelFunc
	started []*binding // not reaped yet
	errs    []error
	done    bool // Run is shutting down: no listener starts any more
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
	v := b.cur.Load()
	b.log.Info("binding started", "queue", b.physical, "module", v.module.Name(), "digest", v.module.Digest()[:12])
	b.stop, b.wait, b.done = cancel, b.lis.Start(ctx), b.lis.Done()
	r.started = append(r.started, b)
}

// reap waits for b's listener to return (at once once Done is closed) and, the first time
// it is called for b, logs how it stopped; an error is recorded for Run to return and stops
// the host.
func (r *runner) reap(b *binding) {
	err := b.wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.reaped {
		return
	}
	b.reaped = true
	r.started = slices.DeleteFunc(r.started, func(x *binding) bool { return x == b })
	if err == nil {
		b.log.Info("binding stopped")
		return
	}
	b.log.Error("binding stopped with an error", "err", err)
	r.errs = append(r.errs, fmt.Errorf("tenants.%s.bindings.%s: %w", b.tenant.name, b.name, err))
	r.cancel()
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
