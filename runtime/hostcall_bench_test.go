package runtime

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHealthyBesideHostCallLoops measures what a tenant looping on host calls leaves the
// others: a healthy echo pool's throughput (one caller, TinyGo echo) while GOMAXPROCS callers
// of a hostile pool run each guest of TestHostCallLoopsStopAtTheTimeLimit (1 s limit),
// divided by its throughput alone just before, the median of 9 such pairs. It prints
// each class's ratio, the same ratio beside guests spinning in plain guest code (the
// reference the fuel counter already held), and the lowest ratio of the host-call classes.
// A bare pool has none of the host's gating (breaker, suspect slots), so on a busy machine
// both stay near the processors' fair share; host's benchmark of the same name measures the
// host with its defaults. b.N is irrelevant. Run:
//
//	go test -run '^$' -bench HealthyBesideHostCallLoops ./runtime/
func BenchmarkHealthyBesideHostCallLoops(b *testing.B) {
	const (
		window = 100 * time.Millisecond
		// The hostile calls' limit: longer than a window, so what is measured beside them
		// is their host calls, not their instances' replacement at the limit.
		limit = time.Second
	)
	rounds := 9
	if testing.Short() {
		rounds = 1 // CI's smoke run (every benchmark once)
	}
	for b.Loop() {
		// One measurement per run, below.
	}
	e := testEngine(b)
	healthy := guestPoolOf(b, e, "healthy", benchFixtures[1].path)
	in, out := &Input{ID: "m", Body: []byte("hello, healthy")}, &Result{}
	rate := func() float64 {
		n := 0
		start := time.Now()
		for time.Since(start) < window {
			if err := healthy.CallInto(context.Background(), in, out); err != nil {
				b.Fatal(err)
			}
			n++
		}
		return float64(n) / time.Since(start).Seconds()
	}
	rate() // warm up
	// The reference: a guest spinning in its own code (loop; br 0; end).
	spin := hostileGuest{name: "guest code only (reference)"}
	guests := append([]hostileGuest{spin}, hostileGuests(hostileServer(b))...)
	lowest, lowestName, reference := 2.0, "", 0.0
	for _, g := range guests {
		n := goruntime.GOMAXPROCS(0)
		p := hostilePool(b, e, g, limit, n)
		// Alternating windows, alone then beside, a ratio per pair and the median of
		// them: the machine's other load moves both windows of a pair alike.
		ratios := make([]float64, rounds)
		for i := range ratios {
			waitWarm(b, p)
			alone := rate()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var started atomic.Int64
			for range n {
				wg.Go(func() {
					for ctx.Err() == nil {
						started.Add(1)
						_, _ = p.Call(ctx, g.input())
					}
				})
			}
			for started.Load() < int64(n) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(10 * time.Millisecond) // the hostile calls under way
			ratios[i] = rate() / alone
			cancel()
			wg.Wait()
		}
		slices.Sort(ratios)
		ratio := ratios[rounds/2]
		fmt.Printf("  %-40s %.2f (rounds %.2f)\n", g.name, ratio, ratios)
		if g.imports == nil {
			reference = ratio
		} else if ratio < lowest {
			lowest, lowestName = ratio, g.name
		}
	}
	fmt.Printf("bare pools: healthy ratio beside host-call loops: %.2f (lowest: %s; beside guest code only: %.2f)\n", lowest, lowestName, reference)
	b.ReportMetric(lowest, "healthy-ratio")
}

// waitWarm waits for p to have no call or refill running: the hostile calls a round cancels
// replace their instances in the background, which is not what the next window measures.
func waitWarm(b *testing.B, p *Pool) {
	deadline := time.Now().Add(time.Minute)
	for st := p.Stats(); st.Busy > 0; st = p.Stats() {
		if time.Now().After(deadline) {
			b.Fatalf("pool still busy: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	p.wg.Wait()
}

// guestPoolOf is a pool of the module at path in its own tenant, one warm instance.
func guestPoolOf(b *testing.B, e *Engine, tenant, path string) *Pool {
	ten, err := e.Tenant(tenant, TenantLimits{})
	if err != nil {
		b.Fatal(err)
	}
	p, err := ten.NewPool(context.Background(), load(b, e, path, ABIWqhostV1), PoolConfig{Binding: "b", OutputQueue: "out", MinInstances: 1, MaxInstances: 1, Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}
