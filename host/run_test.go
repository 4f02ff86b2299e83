package host

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A binding a config reload stopped while Run was starting the bindings it had listed is
// not started after: its listener would run on a closed binding. A binding stopped before
// Run began is refused the same way.
func TestRunnerStartsNoBindingAReloadStopped(t *testing.T) {
	var r runner
	b := &binding{}
	if stop, done := r.stopping(b); stop != nil || done != nil {
		t.Fatalf("a binding never started has stop %v, done %v", stop != nil, done != nil)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r.begin(ctx, cancel)
	r.start(b)
	if b.done != nil {
		t.Fatal("Run started a binding a reload had stopped")
	}
	if errs, stuck := r.finishWithin(time.Minute); len(errs) != 0 || len(stuck) != 0 {
		t.Fatalf("finish: %v, stuck %d", errs, len(stuck))
	}
}

// TestRunnerFinishWithinAbandons: a listener that has not returned when the wait ends is
// handed back as stuck, unreaped, while those that returned are reaped; the wait does not
// outlast its bound.
func TestRunnerFinishWithinAbandons(t *testing.T) {
	var r runner
	returned := make(chan struct{})
	close(returned)
	stuck := &binding{name: "stuck", done: make(chan struct{})}
	ok := &binding{name: "ok", done: returned, wait: func() error { return nil }, log: testLogger(t)}
	r.started = []*binding{stuck, ok}
	errs, left := r.finishWithin(10 * time.Millisecond)
	if len(errs) != 0 || len(left) != 1 || left[0] != stuck {
		t.Fatalf("finishWithin = %v, stuck %v; want no error and the stuck binding", errs, left)
	}
	if !ok.reaped || stuck.reaped {
		t.Errorf("reaped: returned %v, stuck %v; want only the returned one", ok.reaped, stuck.reaped)
	}
}

// TestReloadGivesUpWaitingWithItsContext: a reload waiting for one in progress (a slow
// module compile) returns when its context ends, saying so, instead of waiting it out.
func TestReloadGivesUpWaitingWithItsContext(t *testing.T) {
	h := &Host{reloadMu: newReloadLock()}
	if err := h.reloadMu.lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.reloadMu.unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := h.ReloadAll(ctx); err == nil || !strings.Contains(err.Error(), "waiting for the reload in progress") {
		t.Fatalf("ReloadAll behind a reload in progress = %v; want an error once its context ended", err)
	}
}
