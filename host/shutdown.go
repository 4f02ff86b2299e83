package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/runtime"
)

// Shutdown that no guest can hold up. At the end of the shutdown grace the listeners cancel
// the handlers still running, and a guest stops at its next fuel check or host call. One
// blocked where nothing reaches it (a host call that does not return) would keep its
// listener, and Run, waiting for ever, and Go cannot stop a goroutine from outside. So Run
// waits for the listeners until the grace plus ShutdownSlack only: a binding whose handlers
// have not returned by then is abandoned, its messages left leased (they come back once
// their visibility timeout passes, as after a crash: nothing renews them once the process
// has exited), the log naming the binding and the messages, and Run returns ErrAbandoned
// without closing what those calls still use (their pools, the runtime); everything else
// is closed as usual.

// ErrAbandoned reports that Run gave up on handlers that did not return after the
// shutdown grace; their messages stay leased and are redelivered.
var ErrAbandoned = errors.New("handlers did not return after the shutdown grace; abandoned")

// ShutdownSlack is how long past the shutdown grace Run waits for the handlers the end of
// the grace cancelled before it abandons them, and how long Close waits for a reload in
// progress before it closes without it.
const ShutdownSlack = 2 * time.Second

// ShutdownBound is how long after its context ends Run of a host configured by cfg returns
// at the latest, whatever the guests do: the shutdown grace (shutdown.grace), then
// ShutdownSlack each for the handlers the grace cancelled, the admin requests in progress
// and Close (a reload in progress, the pools of the bindings that stopped).
func ShutdownBound(cfg *config.Config) time.Duration { return cfg.Shutdown.Grace + 3*ShutdownSlack }

// finishWithin starts no listener any more, waits for those started to return (Run's
// context has ended: they are stopping) and returns the errors Run reports, waiting at most
// d: bindings whose listener has not returned by then are returned as stuck (not reaped).
func (r *runner) finishWithin(d time.Duration) (errs []error, stuck []*binding) {
	r.mu.Lock()
	r.done = true
	started := slices.Clone(r.started) // reap edits r.started
	r.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	expired := false
	for _, b := range started {
		if !expired {
			select {
			case <-b.done:
			case <-t.C:
				expired = true
			}
		}
		select {
		case <-b.done:
			r.reap(b)
		default:
			stuck = append(stuck, b)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs), stuck
}

// abandon logs the bindings Run gives up on, with the messages their calls hold, and returns
// the error Run reports.
func (h *Host) abandon(stuck []*binding) error {
	var errs []error
	for _, b := range stuck {
		ids := b.calls.list()
		b.log.Error("shutdown: handlers still running after the shutdown grace; abandoned, their messages left leased for redelivery after the visibility timeout",
			"grace", h.cfg.Shutdown.Grace, "slack", ShutdownSlack, "message_ids", ids,
			"visibility_timeout", b.cfg.VisibilityTimeout)
		errs = append(errs, fmt.Errorf("tenants.%s.bindings.%s: messages %v", b.tenant.name, b.name, ids))
	}
	return fmt.Errorf("host: %w: %w", ErrAbandoned, errors.Join(errs...))
}

// maxListedCalls caps the message ids a binding's abandonment log lists.
const maxListedCalls = 64

// callSet is the messages whose handler call runs, for the log of a shutdown that abandons
// them. By id, counted: the Inputs themselves stay off the heap.
type callSet struct {
	mu  sync.Mutex
	ids map[string]int
}

// add counts a call of each of ins (a batch).
func (c *callSet) add(ins []*runtime.Input) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, in := range ins {
		c.addLocked(in.ID)
	}
}

func (c *callSet) remove(ins []*runtime.Input) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, in := range ins {
		c.removeLocked(in.ID)
	}
}

// addID and removeID are add and remove for one message.
func (c *callSet) addID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(id)
}

func (c *callSet) removeID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(id)
}

func (c *callSet) addLocked(id string) {
	if c.ids == nil {
		c.ids = map[string]int{}
	}
	c.ids[id]++
}

func (c *callSet) removeLocked(id string) {
	if c.ids[id]--; c.ids[id] <= 0 {
		delete(c.ids, id)
	}
}

// list returns the ids of the running calls' messages, sorted, at most maxListedCalls.
func (c *callSet) list() []string {
	c.mu.Lock()
	ids := make([]string, 0, len(c.ids))
	for id := range c.ids {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	slices.Sort(ids)
	if len(ids) > maxListedCalls {
		ids = append(ids[:maxListedCalls], fmt.Sprintf("and %d more", len(ids)-maxListedCalls))
	}
	return ids
}

// reloadLock serialises reloads and Close like a mutex whose lock gives up when a context
// ends: a reload compiling a slow module must not hold a shutdown, nor a reload asked for
// through the admin API beyond its request's life.
type reloadLock chan struct{}

func newReloadLock() reloadLock { return make(reloadLock, 1) }

// lock takes the lock, or returns ctx's error if ctx ends first.
func (l reloadLock) lock(ctx context.Context) error {
	select {
	case l <- struct{}{}:
		return nil
	default:
	}
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (l reloadLock) unlock() { <-l }
