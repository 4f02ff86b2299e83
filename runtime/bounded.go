package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Guest code the host runs outside a message call (a start function, a self test) is
// stopped at its limit by the fuel check or wazero's close-on-context-done, both of which
// act only where the guest's own code runs. A guest blocked inside a host function that
// does not return, or one that spends its whole time in host calls between two checks, is
// out of their reach, and Go cannot stop a goroutine from outside. So that such a guest
// never holds up the host (its start, a reload, its shutdown), these run in a goroutine of
// their own that the caller waits for only until the limit, plus AbandonGrace for the
// guest to notice: past that the caller gets ErrAbandoned and the goroutine is left to
// finish on its own, cleaning up after itself when (if ever) it does.

// AbandonGrace is how long past a start function's or self test's time limit (or its
// caller's context ending) the host waits for it to stop before it gives up on it and
// leaves it running.
const AbandonGrace = 2 * time.Second

// ErrAbandoned reports guest code that did not stop within its time limit plus
// AbandonGrace, because it was blocked where no check reaches; it still runs, abandoned. It
// wraps ErrTimeout when the time limit passed (rather than the caller's context ending).
var ErrAbandoned = errors.New("guest did not stop; abandoned still running")

// bounded runs f and returns its error, unless ctx (which carries the limit) ends and f has
// not returned AbandonGrace later: then bounded returns at once with ErrAbandoned, and when
// f does return, late runs in f's goroutine (to release what f made). Without a way for ctx
// to end, f runs in the caller's goroutine.
func (p *Pool) bounded(ctx context.Context, what string, f func() error, late func()) error {
	if ctx.Done() == nil {
		return f()
	}
	done := make(chan error, 1)
	abandoned := make(chan struct{}) // closed by the caller when it gives up on f
	go func() {
		err := f()
		select {
		case <-abandoned:
			if late != nil {
				late()
			}
			p.stuck.Add(-1)
			p.t.stuck.Add(-1)
			p.logger.Warn("abandoned guest code returned at last", "what", what, "err", err)
		default:
			done <- err
		}
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(AbandonGrace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
	}
	// Counted before f's goroutine can see abandoned closed, so its decrement follows.
	p.stuck.Add(1)
	p.t.stuck.Add(1)
	close(abandoned)
	select {
	case err := <-done: // f returned just before abandoned was closed
		p.stuck.Add(-1)
		p.t.stuck.Add(-1)
		return err
	default:
	}
	p.logger.Error("guest code did not stop within its limit; abandoned still running (its compiled code is kept)",
		"what", what, "grace", AbandonGrace, "cause", context.Cause(ctx))
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w (%w, then %s): %w", what, ErrAbandoned, ErrTimeout, AbandonGrace, context.Cause(ctx))
	}
	return fmt.Errorf("%s: %w: %w", what, ErrAbandoned, context.Cause(ctx))
}

// Stuck returns how many start functions and self tests of the pool were abandoned and
// still run (bounded).
func (p *Pool) Stuck() int { return int(p.stuck.Load()) }

// Stuck returns how many start functions and self tests of the tenant's pools were
// abandoned and still run; the tenant's runtime is not closed while any does.
func (t *Tenant) Stuck() int { return int(t.stuck.Load()) }
