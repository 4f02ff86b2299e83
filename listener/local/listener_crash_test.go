package local_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

const (
	drainCrashEnv   = "WQHOST_LOCAL_DRAIN_CRASH_CHILD"
	drainCrashN     = 3000
	drainSlots      = 4 // a binding's default pool max_instances
	drainPrefetch   = 4
	drainKills      = 10
	drainPerKill    = 150 // outputs each child run produces before it is killed
	drainVisTimeout = time.Second
)

// drainBatch is the batch handler mode's bound: messages per call.
const drainBatch = 50

// drainCrashChild runs a listener with a binding's default shape (16 workers, batches of 32,
// 4 handler slots) on the store at path and prints "O <body>" for every successful handler
// call (its output) until the parent kills it. With batch, the handler takes up to
// drainBatch messages per call and prints every message's output before returning.
func drainCrashChild(path string, batch bool) {
	ctx := context.Background()
	b, err := local.Open(ctx, path, local.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	q, _ := b.Queue(ctx, "drain")
	dl, _ := b.Queue(ctx, "drain"+queue.PoisonSuffix)
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	single := listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "O %s\n", m.Body)
		return out.Flush() // printed before the delete: a kill after it repeats the output
	})
	var h listener.Handler = single
	var bc listener.BatchConfig
	if batch {
		h = drainBatchHandler{single}
		bc = listener.BatchConfig{MaxMessages: drainBatch, MaxWait: 20 * time.Millisecond}
	}
	l, err := listener.New(listener.Config{
		Queue: q, DeadLetter: dl, Handler: h, Batch: bc,
		Backoff:    builtin.NewBackoff(builtin.BackoffOptions{}),
		Scaler:     builtin.NewTarget(0),
		Poison:     builtin.NewPoison(builtin.PoisonOptions{}),
		MaxWorkers: 16, BatchSize: 32, Concurrency: drainSlots,
		HandlerSlots: drainSlots, Prefetch: drainPrefetch,
		VisibilityTimeout: drainVisTimeout,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_ = l.Run(ctx)
}

// TestCrashDrainDuplicatesBounded kills a draining listener (SIGKILL) drainKills times and
// restarts it each time on the same store. A kill repeats at most the outputs of the
// messages the listener held at that moment, and it holds at most HandlerSlots+Prefetch
// unsettled messages whatever its worker count and batch size, so the duplicate outputs are
// at most kills × (slots + prefetch); no message is lost.
//
// In batch mode a slot is one call of up to drainBatch messages, so the bound is
// kills × (slots × drainBatch + prefetch).
func TestCrashDrainDuplicatesBounded(t *testing.T) {
	if p := os.Getenv(drainCrashEnv); p != "" {
		path, mode, _ := strings.Cut(p, "|")
		drainCrashChild(path, mode == "batch")
		return
	}
	if testing.Short() {
		t.Skip("kills and restarts a child process repeatedly")
	}
	for _, mode := range []string{"single", "batch"} {
		t.Run(mode, func(t *testing.T) { crashDrain(t, mode) })
	}
}

// drainBatchHandler runs a single-message handler on each message of a batch.
type drainBatchHandler struct{ listener.HandlerFunc }

func (h drainBatchHandler) HandleBatch(ctx context.Context, ms []*queue.Message, vs []outcome.Outcome) {
	for i, m := range ms {
		vs[i] = outcome.Of(h.HandlerFunc(ctx, m))
	}
}

func crashDrain(t *testing.T, mode string) {
	path := filepath.Join(t.TempDir(), "q.db")
	{
		b, err := local.Open(context.Background(), path, local.Options{})
		if err != nil {
			t.Fatal(err)
		}
		q, _ := b.Queue(context.Background(), "drain")
		bodies := make([][]byte, drainCrashN)
		for i := range bodies {
			bodies[i] = fmt.Append(nil, i)
		}
		if _, err := q.SendBatch(context.Background(), bodies, queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	outputs := map[string]int{}
	runChild := func(stopAfter int) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDrainDuplicatesBounded$")
		cmd.Env = append(os.Environ(), drainCrashEnv+"="+path+"|"+mode)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killed := false
		timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() }) // never hang
		defer timer.Stop()
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			body, ok := strings.CutPrefix(sc.Text(), "O ")
			if !ok {
				continue
			}
			outputs[body]++
			n++
			if (stopAfter > 0 && n >= stopAfter) || len(outputs) == drainCrashN {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				killed = true
				break
			}
		}
		for sc.Scan() { // lines printed before the kill landed
			if body, ok := strings.CutPrefix(sc.Text(), "O "); ok {
				outputs[body]++
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("child ended on its own before being killed: %s", stderr.String())
		}
	}
	for range drainKills {
		runChild(drainPerKill)
		time.Sleep(drainVisTimeout + 200*time.Millisecond) // the killed leases expire
	}
	runChild(0) // to the end
	dups, lost := 0, 0
	for i := range drainCrashN {
		switch k := outputs[fmt.Sprint(i)]; {
		case k == 0:
			lost++
		case k > 1:
			dups += k - 1
		}
	}
	bound := drainKills * (drainSlots + drainPrefetch)
	formula := fmt.Sprintf("kills x (slots %d + prefetch %d); max_workers x batch_size would be %d per kill", drainSlots, drainPrefetch, 16*32)
	if mode == "batch" {
		bound = drainKills * (drainSlots*drainBatch + drainPrefetch)
		formula = fmt.Sprintf("kills x (slots %d x %d per call + prefetch %d): a kill repeats the calls in flight", drainSlots, drainBatch, drainPrefetch)
	}
	fmt.Printf("local crash drain (%s): kills=%d sent=%d duplicates=%d bound=%d (%s) lost=%d\n",
		mode, drainKills, drainCrashN, dups, bound, formula, lost)
	if lost != 0 {
		t.Errorf("%d messages never handled", lost)
	}
	if dups > bound {
		t.Errorf("%d duplicate outputs after %d kills, want at most %d", dups, drainKills, bound)
	}
}
