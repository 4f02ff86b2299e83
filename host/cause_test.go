package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/wasmtest"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/runtime"
)

// TestCauseOfEachRuntimeError: every error a runtime call fails with maps to its cause,
// wrapped as the runtime wraps it; where an error wraps two sentinels the first of the
// mapping's order wins (a guest abandoned after its time limit timed out), and what the
// runtime does not classify is the host's.
func TestCauseOfEachRuntimeError(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("runtime: message m1: %w: wasm error: x", err) }
	tests := []struct {
		err  error
		want outcome.Cause
	}{
		{nil, outcome.CauseNone},
		{wrap(runtime.ErrTimeout), outcome.CauseTimeout},
		{fmt.Errorf("start: %w (%w, then 1s): %w", runtime.ErrAbandoned, runtime.ErrTimeout, context.DeadlineExceeded), outcome.CauseTimeout},
		{wrap(runtime.ErrTrap), outcome.CauseTrap},
		{wrap(runtime.ErrMemoryLimit), outcome.CauseMemoryLimit},
		{wrap(runtime.ErrStackOverflow), outcome.CauseStackOverflow},
		{wrap(runtime.ErrBadStatus), outcome.CauseBadStatus},
		{wrap(runtime.ErrPluginFailed), outcome.CausePluginFailed},
		{wrap(runtime.ErrOutputRefused), outcome.CauseOutputRefused},
		{wrap(&runtime.BudgetError{Budget: "tenant a", Consumer: runtime.ConsumerMessages}), outcome.CauseBudgetRefused},
		{wrap(runtime.ErrMemoryBudget), outcome.CauseBudgetRefused},
		{wrap(runtime.ErrPoolClosed), outcome.CauseHost},
		{wrap(runtime.ErrAbandoned), outcome.CauseHost},
		{fmt.Errorf("runtime: message m1: call abandoned: %w", context.Canceled), outcome.CauseHost},
		{errors.New("instantiating: something else"), outcome.CauseHost},
	}
	for _, tt := range tests {
		if got := causeOf(tt.err); got != tt.want {
			t.Errorf("causeOf(%v) = %s, want %s", tt.err, got, tt.want)
		}
		if tt.err == nil {
			continue
		}
		o := OutcomeOf(&runtime.Result{Err: tt.err})
		if o.Kind != outcome.KindFailed || o.Cause != tt.want || !errors.Is(o.Err, tt.err) {
			t.Errorf("OutcomeOf(%v) = %+v; want failed by %s, wrapping the error", tt.err, o, tt.want)
		}
	}
	for _, v := range []runtime.Verdict{runtime.VerdictOK, runtime.VerdictRetry, runtime.VerdictReject} {
		if o := OutcomeOf(&runtime.Result{Verdict: v}); o.Cause != outcome.CauseNone {
			t.Errorf("verdict %d: cause %s; want none (the call did not fail)", v, o.Cause)
		}
	}
}

// TestFailedCallCarriesItsCause: a binding's call that traps, and one that runs past its
// time limit, end in a failed outcome with that cause, and the attempt the dead letter would
// carry (wqhost.attempts) names it.
func TestFailedCallCarriesItsCause(t *testing.T) {
	loop := wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1"},
		// loop br 0 end; i32.const 0
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x41, 0x00}},
	)
	loopPath := filepath.Join(t.TempDir(), "loop.wasm")
	if err := os.WriteFile(loopPath, loop, 0o644); err != nil {
		t.Fatal(err)
	}
	h, _ := newHostWith(t, "backends:\n  mem: {type: memory}\n", fmt.Sprintf(`  a:
    limits: {timeout: 200ms}
    bindings:
      trap: {backend: mem, queue: traps, module: %q}
      loop: {backend: mem, queue: loops, module: %q}
`, trapModule(t), loopPath))
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	for _, tc := range []struct {
		binding string
		want    outcome.Cause
	}{{"trap", outcome.CauseTrap}, {"loop", outcome.CauseTimeout}} {
		b := h.bindingNamed("a", tc.binding)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		o := b.Handle(ctx, &queue.Message{ID: "m-" + tc.binding, Body: []byte("x"), DequeueCount: 1})
		cancel()
		if o.Kind != outcome.KindFailed || o.Cause != tc.want {
			t.Errorf("%s: outcome %s, cause %s (%s); want failed by %s", tc.binding, o.Kind, o.Cause, o.Reason(), tc.want)
			continue
		}
		var as []attempt
		if err := json.Unmarshal([]byte(o.Attrs[queue.AttrAttempts]), &as); err != nil || len(as) != 1 {
			t.Fatalf("%s: attempts %q (%v); want one", tc.binding, o.Attrs[queue.AttrAttempts], err)
		}
		if as[0].Outcome != "failed" || as[0].Cause != tc.want.String() {
			t.Errorf("%s: attempt %+v; want failed with cause %s", tc.binding, as[0], tc.want)
		}
	}
}
