package faulttest

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/azure/azuritetest"
)

// Crash settings shared by the local and Azure runs. A binding leases only what can start:
// at most the pool's max_instances (default 4) plus as many prefetched messages are leased
// and unsettled at once, whatever batch_size × max_workers (128 here) say, so a kill
// repeats at most crashSlots + crashPrefetch outputs.
const (
	crashBatch    = 32
	crashWorkers  = 4
	crashSlots    = 4 // pool.max_instances default
	crashPrefetch = 4 // listener.Config.Prefetch default: as many as the slots
)

// crashBinding is the echo binding every crash run uses: each output is the input's id.
func crashBinding(backend, visibility string) string {
	return fmt.Sprintf(`
    bindings:
      echo:
        backend: %s
        queue: jobs
        output: done
        module: builtin:echo-go
        batch_size: %d
        max_workers: %d
        visibility_timeout: %s
        backoff: {min: 10ms, max: 200ms}
`, backend, crashBatch, crashWorkers, visibility)
}

// crashRun sends n numbered messages, then runs the host and SIGKILLs it kills times, each
// time a random 0..maxKillDelayMs after it became ready (the drain is under way by then) or,
// byCount, once it processed a random 1..n/(kills+1) messages; restarts it, lets the last run drain the queue, and
// counts the outputs: every id at least once, duplicates within the in-flight bound.
func crashRun(t *testing.T, name, cfgFile string, env []string, n, kills, maxKillDelayMs int, byCount bool) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	ids := numbered("m-", n)
	mustWQ(t, env, "send", "--config", cfgFile, "--queue", "jobs", "--count", strconv.Itoa(n), "m-{n}")

	killed := 0
	for i := 0; i < kills; i++ {
		p := start(t, cfgFile, env)
		p.waitReadyFast(time.Minute)
		if byCount {
			// Slow backends: kill once a random share of the backlog went through.
			at := uint64(1 + rng.IntN(n/(kills+1)))
			waitFor(t, 3*time.Minute, fmt.Sprintf("kill %d: %d processed", i+1, at), func() bool {
				bs, err := p.status("default", "echo", "")
				return err == nil && bs.Processed >= at
			})
		} else {
			time.Sleep(time.Duration(rng.IntN(maxKillDelayMs)) * time.Millisecond)
		}
		bs, err := p.status("default", "echo", "")
		p.kill()
		killed++
		if err != nil {
			t.Fatalf("kill %d: %v", i+1, err)
		}
		t.Logf("kill %d: SIGKILL after %d processed (%d in flight, depth %d)", i+1, bs.Processed, bs.InFlight, bs.Depth)
		if bs.Depth == 0 {
			t.Fatalf("kill %d came after the queue drained: nothing was in flight; send more messages", i+1)
		}
	}
	p := startReady(t, cfgFile, env)
	p.waitDrained("default", "echo", 5*time.Minute)
	if code := p.stop(time.Minute); code != 0 {
		t.Fatalf("final SIGTERM: exit %d", code)
	}

	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // the test reads the queues with the host's config, secrets included
	}
	cfg := loadConfig(t, cfgFile, env)
	c, missing := countIDs(ids, bodies(readAll(t, cfg, "default", "done")))
	c.injected = killed
	report(t, name, c)
	if c.lost != 0 {
		t.Errorf("%d of %d messages lost (e.g. %v)", c.lost, n, missing)
	}
	bound := killed * (crashSlots + crashPrefetch)
	fmt.Printf("%s: duplicates=%d bound=%d (kills %d × (slots %d + prefetch %d); batch × workers would allow %d)\n",
		name, c.duplicated, bound, killed, crashSlots, crashPrefetch, killed*crashBatch*crashWorkers)
	if c.duplicated > bound {
		t.Errorf("%d duplicates after %d kills; at most %d (slots %d + prefetch %d per kill) were in flight", c.duplicated, killed, bound, crashSlots, crashPrefetch)
	}
	if dl := deadLetters(t, cfgFile, env, "default", "jobs"); len(dl) != 0 {
		t.Errorf("%d messages dead-lettered by crashes; first: %+v", len(dl), dl[0])
	}
}

// TestFaultCrashLocal: SIGKILL the host mid-drain on the local (SQLite) store several times;
// every message is processed at least once after restarts.
func TestFaultCrashLocal(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, fmt.Sprintf("data_dir: %s\nlog: {level: warn}\ntenants:\n  default:%s",
		filepath.Join(dir, "data"), crashBinding("local", "2s")))
	crashRun(t, "crash-local", cfg, nil, 30000, 5, 300, false)
}

// TestFaultCrashAzurite: the same against Azure Queue Storage (Azurite, pop-receipt leases).
func TestFaultCrashAzurite(t *testing.T) {
	az := azuritetest.Start(t)
	dir := t.TempDir()
	env := []string{"FAULT_AZURE_CONNECTION_STRING=" + az.ConnectionString()}
	cfg := writeConfig(t, dir, fmt.Sprintf(`data_dir: %s
log: {level: warn}
backends:
  az:
    type: azure
    connection_string_env: FAULT_AZURE_CONNECTION_STRING
    create_queues: true
tenants:
  default:%s`, filepath.Join(dir, "data"), crashBinding("az", "10s")))
	crashRun(t, "crash-azurite", cfg, env, 1000, 3, 0, true)
}
