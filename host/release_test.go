package host

import (
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/runtime"
)

// A call that panics inside Pool.Call (recovered further up, as the listener recovers a
// handler's panic) still gives back its count on the module version: retiring that version
// after a hot reload then completes instead of waiting for ever for a call long gone.
func TestCallPanicReleasesVersion(t *testing.T) {
	// A version without a pool: Pool.CallInto panics on it, in the caller's goroutine.
	v := &version{drained: make(chan struct{})}
	b := &binding{}
	b.cur.Store(v)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the call did not panic")
			}
		}()
		_ = b.call(t.Context(), &runtime.Input{ID: "m1"})
	}()
	if n := v.refs.Load(); n != 0 {
		t.Fatalf("%d calls still counted on the version after the panic, want 0", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	v.drain(ctx)
	select {
	case <-v.drained:
	default:
		t.Fatal("retiring the version waited for a call that panicked (drain ended only by its deadline)")
	}
}
