package host

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestShutdownGraceFromConfig: shutdown.grace bounds how long a stop waits for a handler in
// flight. A handler that sleeps 20 s is cancelled (or abandoned ShutdownSlack later) after a
// grace of 500ms, and its message stays in the queue for redelivery; with the grace fixed
// at 30 s the stop waited for the handler to finish.
func TestShutdownGraceFromConfig(t *testing.T) {
	h, cfg := newHostWith(t, "shutdown: {grace: 500ms}\n", fmt.Sprintf(`
  default:
    bindings:
      slow:
        queue: in
        output: out
        module: %q
        max_workers: 1
        pool: {max_instances: 1}
`, abs(t, flakyWasm)))
	if cfg.Shutdown.Grace != 500*time.Millisecond {
		t.Fatalf("shutdown.grace decoded as %s, want 500ms", cfg.Shutdown.Grace)
	}
	send(t, h, "default", "in", "sleep:20000")
	stop := run(t, h)
	eventually(t, "the handler in flight", func() bool { return bindingStatus(t, h, "default", "slow").InFlight > 0 })
	start := time.Now()
	err := stop()
	took := time.Since(start)
	t.Logf("stop with a 20s handler in flight: %s (grace 500ms, slack %s): %v", took.Round(time.Millisecond), ShutdownSlack, err)
	if bound := ShutdownBound(cfg) + 2*time.Second; took > bound {
		t.Errorf("the stop took %s; want within %s (shutdown.grace 500ms)", took.Round(time.Millisecond), bound)
	}
	if err == nil {
		t.Errorf("Run returned nil; want the error naming the handlers cancelled at the end of the grace")
	}
	q, closeQ, err := OpenQueue(context.Background(), cfg, "default", "in")
	if err != nil {
		t.Fatal(err)
	}
	defer closeQ.Close()
	if d, err := q.Depth(context.Background()); err != nil || d != 1 {
		t.Errorf("input depth after the stop = %d, %v; want the unfinished message kept (1)", d, err)
	}
}
