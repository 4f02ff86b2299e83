package host

import (
	"context"
	"testing"
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
	if errs := r.finish(); len(errs) != 0 {
		t.Fatalf("finish: %v", errs)
	}
}
