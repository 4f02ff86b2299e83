package external

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// policyDrainN is the backlog each drain of BenchmarkPolicyDrain processes, and
// policyPairsPerOp the pairs of drains (built-in, plugin) one benchmark iteration runs, so
// that even a single iteration has a median worth reading.
const (
	policyDrainN     = 100_000
	policyPairsPerOp = 5
)

// policySet is the three policies a listener is given.
type policySet struct {
	backoff listener.Backoff
	scaler  listener.Scaler
	poison  listener.PoisonPolicy
}

// BenchmarkPolicyDrain shows what a policy plugin costs end to end. A pair of drains takes
// 100k messages from the memory backend through a listener (no-op handler, default limits)
// once with the built-in policies in process and once with the same built-ins served by a
// plugin process (testdata/builtinplugin); pairs alternate which goes first so that drift on
// a noisy machine hits both alike, and an iteration runs policyPairsPerOp pairs.
//
// Metrics: msg/s of each; plugin/builtin, the median over pairs of the plugin drain's rate
// over its built-in partner's (0.95 would be a 5 % loss); plugin-calls/drain, the decisions
// that crossed the process boundary — one per scale check and per empty receive, never per
// successful message, so a handful per drain; and, on Linux, cpu-plugin/builtin, the CPU
// time of the plugin drains (host and plugin process) over that of the built-in ones, which
// other load on a shared machine disturbs far less than wall-clock time.
//
// "default" uses the listener's default 10 s time slice; "slice-20ms" makes every worker
// hand back its slot every 20 ms, and the supervisor ask the scaler again, to stress the
// scale-check path far beyond any sensible configuration.
//
//	go test -run '^$' -bench PolicyDrain -benchtime 3x ./plugins/external
func BenchmarkPolicyDrain(b *testing.B) {
	p := startBench(b, buildPlugin(b, "./testdata/builtinplugin"))
	builtins := policySet{builtin.NewBackoff(builtin.BackoffOptions{}), builtin.NewTarget(0), builtin.NewPoison(builtin.PoisonOptions{})}
	served := policySet{p.Backoff(), p.Scaler(), p.Poison()}
	for _, tt := range []struct {
		name  string
		slice time.Duration
	}{{"default", 0}, {"slice-20ms", 20 * time.Millisecond}} {
		b.Run(tt.name, func(b *testing.B) {
			var inProc, viaPlugin, cpuIn, cpuVia time.Duration
			cpuOK := true
			var calls uint64
			ratios := make([]float64, 0, b.N*policyPairsPerOp)
			for i := range b.N * policyPairsPerOp {
				b.StopTimer()
				builtinFirst := i%2 == 0
				var pair [2]time.Duration // builtin, plugin
				for k := range 2 {
					if (k == 0) == builtinFirst {
						d, _, cpu, ok := drainOnce(b, builtins, tt.slice, nil)
						pair[0], inProc, cpuIn, cpuOK = d, inProc+d, cpuIn+cpu, cpuOK && ok
						continue
					}
					before := p.Status()
					d, after, cpu, ok := drainOnce(b, served, tt.slice, p)
					pair[1], viaPlugin, cpuVia, cpuOK = d, viaPlugin+d, cpuVia+cpu, cpuOK && ok
					// Decisions cut short by the listener's shutdown after the drain fall
					// back too; only those made while draining are checked.
					if fb := after.Fallbacks - before.Fallbacks; fb > 0 {
						b.Errorf("%d of %d decisions fell back to the built-in: the plugin was not measured", fb, after.Calls-before.Calls)
					}
					if after.Calls == before.Calls {
						b.Fatal("the listener made no decision through the plugin")
					}
					calls += after.Calls - before.Calls
				}
				ratios = append(ratios, pair[0].Seconds()/pair[1].Seconds())
			}
			rate := func(d time.Duration) float64 { return float64(policyDrainN*len(ratios)) / d.Seconds() }
			b.ReportMetric(rate(inProc), "builtin-msg/s")
			b.ReportMetric(rate(viaPlugin), "plugin-msg/s")
			// The median of the per-pair ratios: one drain disturbed by another process
			// on the shared machine moves the mean of the rates, not the median.
			slices.Sort(ratios)
			b.Logf("%d pairs, plugin/builtin sorted: %.3f", len(ratios), ratios)
			b.ReportMetric(ratios[len(ratios)/2], "plugin/builtin")
			b.ReportMetric(float64(calls)/float64(len(ratios)), "plugin-calls/drain")
			if cpuOK {
				b.ReportMetric(cpuVia.Seconds()/cpuIn.Seconds(), "cpu-plugin/builtin")
			}
		})
	}
}

// drainOnce fills a fresh memory queue with policyDrainN messages, runs a listener with the
// given policies until all are processed and returns how long that took, and p's status at
// that moment when p is not nil. A zero slice keeps the listener's default time slice.
//
// It also returns the CPU time the drain took in this process and, with p, in the plugin
// process; cpuOK is false where that cannot be measured.
func drainOnce(b *testing.B, ps policySet, slice time.Duration, p *Plugin) (elapsed time.Duration, st Status, cpu time.Duration, cpuOK bool) {
	b.Helper()
	ctx := context.Background()
	be := memory.New(memory.Options{})
	q, err := be.Queue(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	dl, err := be.Queue(ctx, "bench-poison")
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 100)
	for i := range policyDrainN {
		if _, err := q.Send(ctx, body, queue.SendOptions{}); err != nil {
			b.Fatalf("fill message %d: %v", i, err)
		}
	}
	l, err := listener.New(listener.Config{
		Queue:      q,
		DeadLetter: dl,
		Handler:    listener.HandlerFunc(func(context.Context, *queue.Message) error { return nil }),
		Backoff:    ps.backoff,
		Scaler:     ps.scaler,
		Poison:     ps.poison,
		TimeSlice:  slice,
		Logger:     quietLogger(),
	})
	if err != nil {
		b.Fatal(err)
	}
	pid := 0
	if p != nil {
		if pid = p.Status().Pid; pid == 0 {
			b.Fatal("the plugin is not running")
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	cpu0, err0 := cpuTime(pid)
	b.StartTimer()
	start := time.Now()
	go func() { done <- l.Run(runCtx) }()
	for l.State().Processed < policyDrainN {
		time.Sleep(200 * time.Microsecond)
	}
	elapsed = time.Since(start)
	b.StopTimer()
	cpu1, err1 := cpuTime(pid)
	cpu, cpuOK = cpu1-cpu0, err0 == nil && err1 == nil
	if p != nil {
		st = p.Status()
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if s := l.State(); s.Processed != policyDrainN || s.Failed != 0 {
		b.Fatalf("processed %d, failed %d; want %d, 0", s.Processed, s.Failed, policyDrainN)
	}
	return elapsed, st, cpu, cpuOK
}
