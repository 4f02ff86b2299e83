package host

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// callRecorder replaces a binding's latency observer to keep every call's end time and
// duration.
type callRecorder struct {
	mu   sync.Mutex
	ends []time.Time
	durs []time.Duration
}

func (r *callRecorder) Observe(seconds float64) {
	now := time.Now()
	r.mu.Lock()
	r.ends = append(r.ends, now)
	r.durs = append(r.durs, time.Duration(seconds*float64(time.Second)))
	r.mu.Unlock()
}

func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[(len(ds)*99)/100]
}

// BenchmarkHotReload swaps the module of a binding under steady load (memory backend, the
// versioned fixture) b.N times and reports: the time from the file write (rename of the new
// file into place) to the new version serving, with the watcher's default debounce
// (write-to-serve-ms) and without it (build-and-swap-ms); and the p99 handler latency of calls
// that started within 100 ms after a swap against calls outside those windows.
func BenchmarkHotReload(b *testing.B) {
	h, dir := reloadHost(b, `
  default:
    bindings:
      echo:
        backend: mem
        queue: in
        output: out
        module: handler.wasm
        batch_size: 32
        max_workers: 4
        backoff: {min: 1ms, max: 5ms}
        pool: {min_instances: 2, max_instances: 4}
`)
	h.debounce = defaultDebounce
	rec := &callRecorder{}
	h.bindingNamed("default", "echo").latency = rec
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	in, err := h.OpenQueue(ctx, "default", "in")
	if err != nil {
		b.Fatal(err)
	}
	out, err := h.OpenQueue(ctx, "default", "out")
	if err != nil {
		b.Fatal(err)
	}
	// Steady load: keep a few hundred messages queued; drop outputs so memory stays flat.
	var loadWG sync.WaitGroup
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		body := []byte("steady")
		for ctx.Err() == nil {
			if d, err := in.Depth(ctx); err == nil && d < 300 {
				for range 100 {
					_, _ = in.Send(ctx, body, queue.SendOptions{})
				}
			}
			if ms, err := out.Receive(ctx, 32, time.Minute); err == nil {
				for _, m := range ms {
					_ = out.Delete(ctx, m)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond) // warm up
	modPath := filepath.Join(dir, "handler.wasm")
	fixtures := map[string][]byte{"v1": readFixture(b, "v1"), "v2": readFixture(b, "v2")}
	serving := "v1"
	type window struct{ from, to time.Time }
	var windows []window
	var toServe time.Duration
	b.ResetTimer()
	for range b.N {
		next := map[string]string{"v1": "v2", "v2": "v1"}[serving]
		want := digestOf(fixtures[next])
		start := time.Now()
		replaceModule(b, modPath, fixtures[next], false)
		for h.bindingNamed("default", "echo").cur.Load().module.Digest() != want {
			time.Sleep(100 * time.Microsecond)
		}
		served := time.Now()
		toServe += served.Sub(start)
		windows = append(windows, window{served.Add(-time.Millisecond), served.Add(100 * time.Millisecond)})
		serving = next
		b.StopTimer()
		time.Sleep(300 * time.Millisecond) // steady period between swaps
		b.StartTimer()
	}
	b.StopTimer()
	cancel()
	loadWG.Wait()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	rec.mu.Lock()
	var swap, steady []time.Duration
	for i, end := range rec.ends {
		startAt := end.Add(-rec.durs[i])
		in := false
		for _, w := range windows {
			if !startAt.Before(w.from) && startAt.Before(w.to) {
				in = true
				break
			}
		}
		if in {
			swap = append(swap, rec.durs[i])
		} else {
			steady = append(steady, rec.durs[i])
		}
	}
	rec.mu.Unlock()
	avg := toServe / time.Duration(b.N)
	b.ReportMetric(float64(avg)/float64(time.Millisecond), "write-to-serve-ms")
	b.ReportMetric(float64(avg-defaultDebounce)/float64(time.Millisecond), "build-and-swap-ms")
	ps, pw := p99(steady), p99(swap)
	b.ReportMetric(float64(ps)/float64(time.Microsecond), "p99-steady-us")
	b.ReportMetric(float64(pw)/float64(time.Microsecond), "p99-swap-us")
	if ps > 0 {
		b.ReportMetric(float64(pw)/float64(ps), "p99-swap/steady")
	}
	b.ReportMetric(float64(len(swap)), "calls-in-swap-windows")
	b.ReportMetric(0, "ns/op")
}
