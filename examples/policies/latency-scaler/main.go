// Command latency-scaler is an external scaler policy plugin for wqhost. It grows the worker
// count while the queue has a backlog and the handlers' p99 latency stays under a target, and
// shrinks it multiplicatively when p99 goes over: rising handler latency under more workers
// means they are contending (CPU, a downstream service), so more workers would only queue.
//
// Usage (as a wqhost policy plugin): latency-scaler [-target 200ms]
// The target may also come from LATENCY_SCALER_TARGET.
package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/plugins/sdk"
)

// scaler follows a target p99 handler latency.
type scaler struct {
	target time.Duration
}

// Desired implements listener.Scaler.
func (s scaler) Desired(_ context.Context, st listener.State) int {
	if st.Depth <= 0 && st.InFlight == 0 {
		return st.MinWorkers
	}
	cur := max(st.ActiveWorkers, 1)
	if st.LatencyP99 > s.target {
		// Scale by target/p99 so a handler twice as slow as wanted halves the workers.
		return max(1, int(int64(cur)*int64(s.target)/int64(st.LatencyP99)))
	}
	if int64(cur) >= st.Depth {
		return cur
	}
	// Under target with a backlog: grow by half (at least one), never past the backlog.
	return int(min(int64(cur+max(1, cur/2)), st.Depth))
}

func main() {
	target := flag.Duration("target", sdk.Duration(os.Getenv("LATENCY_SCALER_TARGET"), 200*time.Millisecond),
		"p99 handler latency to follow")
	flag.Parse()
	sdk.Serve(sdk.Policies{Name: "latency-scaler", Scaler: scaler{target: *target}})
}
