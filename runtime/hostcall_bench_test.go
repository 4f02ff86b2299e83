package runtime

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkHealthyBesideHostCallLoops measures what a tenant looping on host calls leaves the
// others: a healthy echo pool's throughput (one caller, TinyGo echo) while GOMAXPROCS callers
// of a hostile pool run each guest of TestHostCallLoopsStopAtTheTimeLimit back to back (200
// ms limit), divided by its throughput alone measured just before, in the same run. It prints
// each class's ratio, the same ratio beside guests spinning in plain guest code (the
// reference the fuel counter already held), and the line docs/guarantees.md quotes: the
// lowest ratio of the host-call classes. b.N is irrelevant. Run:
//
//	go test -run '^$' -bench HealthyBesideHostCallLoops ./runtime/
func BenchmarkHealthyBesideHostCallLoops(b *testing.B) {
	const (
		window = 300 * time.Millisecond
		limit  = 200 * time.Millisecond
	)
	for b.Loop() {
		// One measurement per run, below.
	}
	e := testEngine(b)
	healthy := guestPoolOf(b, e, "healthy", benchFixtures[1].path)
	in := &Input{ID: "m", Body: []byte("hello, healthy")}
	rate := func() float64 {
		var n atomic.Int64
		stop := time.Now().Add(window)
		out := &Output{}
		for time.Now().Before(stop) {
			if err := healthy.CallInto(context.Background(), in, out); err != nil {
				b.Fatal(err)
			}
			n.Add(1)
		}
		return float64(n.Load()) / window.Seconds()
	}
	rate() // warm up
	// The reference: a guest spinning in its own code (loop; br 0; end).
	spin := hostileGuest{name: "guest code only (reference)"}
	guests := append([]hostileGuest{spin}, hostileGuests(hostileServer(b))...)
	lowest, lowestName := 2.0, ""
	for _, g := range guests {
		p := hostilePool(b, e, g, limit, goruntime.GOMAXPROCS(0))
		alone := rate()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range goruntime.GOMAXPROCS(0) {
			wg.Go(func() {
				for ctx.Err() == nil {
					_, _ = p.Call(ctx, g.input())
				}
			})
		}
		time.Sleep(50 * time.Millisecond) // the hostile calls under way
		beside := rate()
		cancel()
		wg.Wait()
		ratio := beside / alone
		fmt.Printf("  %-40s %.0f/s alone, %.0f/s beside: %.2f\n", g.name, alone, beside, ratio)
		if g.imports != nil && ratio < lowest {
			lowest, lowestName = ratio, g.name
		}
	}
	fmt.Printf("healthy ratio beside host-call loops: %.2f (lowest: %s)\n", lowest, lowestName)
	b.ReportMetric(lowest, "healthy-ratio")
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
