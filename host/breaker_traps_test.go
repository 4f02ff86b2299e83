package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"

	"github.com/wqhost/wqhost/internal/wasmtest"
	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

// trapsPoisonBound is the documented bound (docs/guarantees.md, "how long a broken handler
// takes") on top of the retry delays for N messages whose handler fails cheaply: their
// calls, receives and dead letters. Generous: it holds beside CPU-burning neighbours, and
// the old breaker took minutes to hours here (one probe per doubling cool-down).
const trapsPoisonBound = 20 * time.Second

// poisonAllTrapping sends n messages that trap at once to a binding on backend (a key of
// top's backends, or "" for memory) and waits until all are dead-lettered; it returns how
// long that took and checks each dead letter's dequeue count and reason.
func poisonAllTrapping(t *testing.T, top, backend string, n, dequeues int, base, maxDelay time.Duration) time.Duration {
	t.Helper()
	guest := trapModule(t)
	// A 10s time limit: the old breaker's first cool-down would be 10s, doubling to 80s.
	h, _ := newHostWith(t, top, fmt.Sprintf(`  a:
    limits: {timeout: 10s}
    bindings:
      trap: {backend: %s, queue: traps, module: %q, max_dequeue_count: %d, backoff: {min: 5ms, max: 50ms}, poison: {base_delay: %s, max_delay: %s}}
`, backend, guest, dequeues, base, maxDelay))
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = "trap"
	}
	send(t, h, "a", "traps", bodies...)
	begin := time.Now()
	stop := run(t, h)
	b := h.bindingNamed("a", "trap")
	var took time.Duration
	for {
		took = time.Since(begin)
		if b.lis.State().Poisoned >= uint64(n) {
			break
		}
		if took > 5*time.Minute {
			t.Fatalf("%d of %d trapping messages dead-lettered after %s; breaker %+v", b.lis.State().Poisoned, n, took, bindingStatus(t, h, "a", "trap").Breaker)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := bindingStatus(t, h, "a", "trap").Breaker; st.Trips != 0 {
		t.Errorf("cheap traps opened the breaker: %+v", st)
	}
	dls := drainBodies(t, h, "a", "traps-poison")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if len(dls) != n {
		t.Errorf("%d dead letters, want %d", len(dls), n)
	}
	for _, m := range dls {
		if m.Attributes[queue.AttrDequeueCount] != fmt.Sprint(dequeues) || !strings.Contains(m.Attributes[queue.AttrReason], "trap") {
			t.Fatalf("dead letter %s: dequeue count %q reason %q; want %d and a trap", m.ID, m.Attributes[queue.AttrDequeueCount], m.Attributes[queue.AttrReason], dequeues)
		}
	}
	return took
}

// trapModule writes a wqhost/v1 module whose handler traps at once (unreachable) and
// returns its path. It has no start function, so replacing its instance after each trap
// costs microseconds: the test measures the breaker's and the poison policy's pace, not a
// guest runtime's start (a standard Go module's, tens to hundreds of milliseconds under
// -race, adds that to each delivery, spread over the pool's instances).
func trapModule(t *testing.T) string {
	t.Helper()
	mod := wasmtest.Module(
		wasmtest.Func{Export: "wqhost_abi_v1"},
		wasmtest.Func{Export: "wqhost_handle", Results: []byte{wasmtest.I32}, Body: []byte{0x00}}, // unreachable
	)
	path := filepath.Join(t.TempDir(), "trap.wasm")
	if err := os.WriteFile(path, mod, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// retryDelays is the sum of the poison policy's delays before a message's last delivery,
// with the jitter's +10 %, each rounded up to whole units of gran (Azure: seconds).
func retryDelays(dequeues int, base, maxDelay, gran time.Duration) time.Duration {
	var sum time.Duration
	d := base
	for range dequeues - 1 {
		j := d + d/10
		sum += (j + gran - 1) / gran * gran
		d = min(2*d, maxDelay)
	}
	return sum
}

// TestAlwaysTrappingHandlerPoisonsPromptly: a handler that traps at once on every message
// (a cheap, deterministic failure) poisons 100 messages after max_dequeue_count deliveries
// each, within the retry delays plus the documented bound, its breaker never opening. The
// breaker used to count such traps: it let one probe through per doubling cool-down, and
// the backlog took hours.
func TestAlwaysTrappingHandlerPoisonsPromptly(t *testing.T) {
	const n, dequeues = 100, 5
	base, maxDelay := 100*time.Millisecond, 400*time.Millisecond
	took := poisonAllTrapping(t, "backends:\n  mem: {type: memory}\n", "mem", n, dequeues, base, maxDelay)
	bound := retryDelays(dequeues, base, maxDelay, time.Nanosecond) + trapsPoisonBound
	t.Logf("memory: %d always-trapping messages dead-lettered after %d deliveries each in %s (bound %s)", n, dequeues, took, bound)
	if took > bound {
		t.Errorf("took %s, above the bound %s", took, bound)
	}
}

// TestAlwaysTrappingHandlerPoisonsPromptlyAzurite is the same on Azurite, whose visibility
// delays are whole seconds.
func TestAlwaysTrappingHandlerPoisonsPromptlyAzurite(t *testing.T) {
	az := azuritetest.Start(t)
	t.Setenv("WQHOST_TEST_AZURITE", az.ConnectionString())
	const n, dequeues = 100, 5
	base, maxDelay := time.Second, 2*time.Second
	took := poisonAllTrapping(t, "backends:\n  az: {type: azure, connection_string_env: WQHOST_TEST_AZURITE, create_queues: true}\n", "az", n, dequeues, base, maxDelay)
	bound := retryDelays(dequeues, base, maxDelay, time.Second) + trapsPoisonBound
	t.Logf("azurite: %d always-trapping messages dead-lettered after %d deliveries each in %s (bound %s)", n, dequeues, took, bound)
	if took > bound {
		t.Errorf("took %s, above the bound %s", took, bound)
	}
}
