package external

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// buildPlugin builds the plugin command pkg (relative to this package) into tb's temp dir.
func buildPlugin(tb testing.TB, pkg string) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), filepath.Base(pkg))
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// startBench starts the plugin at path with the built-in policies as fallbacks and a
// deadline no benchmark call reaches, so that every measured call is a real round trip.
func startBench(tb testing.TB, path string) *Plugin {
	tb.Helper()
	p, err := Start(context.Background(), Config{Path: path, Logger: quietLogger(), CallTimeout: 5 * time.Second},
		builtin.NewBackoff(builtin.BackoffOptions{}), builtin.NewTarget(0), builtin.NewPoison(builtin.PoisonOptions{}))
	if err != nil {
		tb.Fatalf("Start(%s): %v", path, err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// BenchmarkPolicyDecision measures one decision of each policy made by the built-in in
// process, by the same built-in served from a plugin process (testdata/builtinplugin, so the
// difference is go-plugin's gRPC round trip), and by the example plugin where
// examples/policies has one. Plugin sub-benchmarks report x-builtin: their ns/op over the
// built-in's.
func BenchmarkPolicyDecision(b *testing.B) {
	ctx := context.Background()
	served := startBench(b, buildPlugin(b, "./testdata/builtinplugin"))
	latency := startBench(b, bins.latencyScaler)
	pattern := startBench(b, bins.patternPoison)

	state := listener.State{Queue: "orders", Depth: 700, ActiveWorkers: 4, PeakWorkers: 6, MinWorkers: 1, MaxWorkers: 16,
		InFlight: 30, LatencyP50: 8 * time.Millisecond, LatencyP99: 40 * time.Millisecond}
	idle := listener.IdleState{Idle: 4, ActiveWorkers: 3}
	failure := listener.Failure{
		Message:         &queue.Message{ID: "m-1", Queue: "orders", DequeueCount: 2, InsertedAt: time.Unix(1_700_000_000, 0), Attributes: map[string]string{"k": "v"}},
		Outcome:         outcome.Failed(errors.New("downstream returned 503")),
		MaxDequeueCount: 5,
	}

	scaler := func(s listener.Scaler) func() { return func() { s.Desired(ctx, state) } }
	backoff := func(p listener.Backoff) func() { return func() { p.Next(ctx, idle) } }
	poison := func(p listener.PoisonPolicy) func() { return func() { p.Decide(ctx, failure) } }

	type impl struct {
		name   string
		decide func()
		via    *Plugin // nil for the in-process built-in
	}
	kinds := []struct {
		name  string
		impls []impl
	}{
		{"scaler", []impl{
			{"builtin", scaler(builtin.NewTarget(0)), nil},
			{"plugin", scaler(served.Scaler()), served},
			{"example", scaler(latency.Scaler()), latency},
		}},
		{"backoff", []impl{
			{"builtin", backoff(builtin.NewBackoff(builtin.BackoffOptions{})), nil},
			{"plugin", backoff(served.Backoff()), served},
		}},
		{"poison", []impl{
			{"builtin", poison(builtin.NewPoison(builtin.PoisonOptions{})), nil},
			{"plugin", poison(served.Poison()), served},
			{"example", poison(pattern.Poison()), pattern},
		}},
	}
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			var builtinNs float64
			for _, im := range k.impls {
				b.Run(im.name, func(b *testing.B) {
					var before Status
					if im.via != nil {
						before = im.via.Status()
					}
					for b.Loop() {
						im.decide()
					}
					ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					if im.via == nil {
						builtinNs = ns
						return
					}
					if fb := im.via.Status().Fallbacks - before.Fallbacks; fb > 0 {
						b.Errorf("%d calls were answered by the fallback, not the plugin", fb)
					}
					if builtinNs > 0 {
						b.ReportMetric(ns/builtinNs, "x-builtin")
					}
				})
			}
		})
	}
}
