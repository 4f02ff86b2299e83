package listener_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// Randomized runs (handler failures and rejects, run times, worker counts, batch sizes,
// concurrency, push, time slices, max dequeue counts): every message ends either processed
// exactly once or dead-lettered exactly once, never both, and none is lost.
func TestRandomizedEveryMessageSettledOnce(t *testing.T) {
	runs := 60
	if testing.Short() {
		runs = 15
	}
	for seed := range uint64(runs) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomRun(t, seed) })
		})
	}
}

func randomRun(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 42))
	e := newMem(t)
	cfg := baseConfig(e.q, e.dl)
	cfg.MaxWorkers = 1 + r.IntN(16)
	cfg.MinWorkers = 1 + r.IntN(min(cfg.MaxWorkers, 3))
	cfg.BatchSize = 1 + r.IntN(queue.MaxBatch)
	cfg.Concurrency = 1 + r.IntN(cfg.BatchSize)
	cfg.MaxDequeueCount = 1 + r.IntN(5)
	cfg.Push = r.IntN(2) == 0
	cfg.TimeSlice = time.Duration(1+r.IntN(10)) * time.Second
	cfg.Scaler = builtin.NewTarget(int64(1 + r.IntN(64)))
	failP := r.Float64() * 0.6
	rejectP := r.Float64() * 0.05
	n := 50 + r.IntN(300)

	var mu sync.Mutex
	attempts := map[string]int{}
	successes := map[string]int{}
	failures := map[string]int{}
	// decide is a pure function of (seed, message, attempt), so a run does not depend on
	// the order the goroutines happen to run in.
	decide := func(id string, attempt int) (fail, reject bool, work time.Duration) {
		h := fnv.New64a()
		fmt.Fprint(h, seed, id, attempt)
		x := rand.New(rand.NewPCG(h.Sum64(), 7))
		return x.Float64() < failP, x.Float64() < rejectP, time.Duration(x.IntN(2000)) * time.Millisecond
	}
	cfg.Handler = listener.HandlerFunc(func(_ context.Context, m *queue.Message) error {
		mu.Lock()
		attempts[m.ID]++
		a := attempts[m.ID]
		mu.Unlock()
		fail, reject, work := decide(m.ID, a)
		time.Sleep(work)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case reject:
			failures[m.ID]++
			return outcome.Reject(errors.New("rejected"))
		case fail:
			failures[m.ID]++
			return errors.New("random failure")
		}
		successes[m.ID]++
		return nil
	})
	ids := e.send(t, n)
	l := start(t, cfg)
	waitFor(t, time.Second, 24*time.Hour, "every message settled", func() bool {
		s := l.State()
		return s.Processed+s.Poisoned == uint64(n)
	})
	time.Sleep(time.Hour) // nothing further may happen
	synctest.Wait()
	if err := l.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	dead := map[string]int{}
	for {
		ms, err := e.dl.Receive(context.Background(), queue.MaxBatch, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			dead[m.Attributes[queue.AttrOriginalID]]++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		s, d := successes[id], dead[id]
		switch {
		case s == 1 && d == 0:
		case s == 0 && d == 1:
			if f := failures[id]; f > cfg.MaxDequeueCount || f < 1 {
				t.Errorf("message %s dead-lettered after %d failures (max_dequeue_count %d)", id, f, cfg.MaxDequeueCount)
			}
		default:
			t.Errorf("message %s: %d successes, %d dead letters; want exactly one of them", id, s, d)
		}
	}
	if depth, _ := e.q.Depth(context.Background()); depth != 0 {
		t.Errorf("%d messages left in the queue", depth)
	}
	st := l.State()
	if st.LeasesLost != 0 || int(st.Processed) != countOnes(successes) || int(st.Poisoned) != len(dead) {
		t.Errorf("state: processed %d, poisoned %d, leases lost %d; want %d, %d, 0", st.Processed, st.Poisoned, st.LeasesLost, countOnes(successes), len(dead))
	}
	if t.Failed() {
		t.Logf("config: min %d max %d batch %d concurrency %d max_dequeue %d push %v slice %s fail %.2f reject %.2f n %d",
			cfg.MinWorkers, cfg.MaxWorkers, cfg.BatchSize, cfg.Concurrency, cfg.MaxDequeueCount, cfg.Push, cfg.TimeSlice, failP, rejectP, n)
	}
}

func countOnes(m map[string]int) int {
	n := 0
	for _, v := range m {
		if v == 1 {
			n++
		}
	}
	return n
}
