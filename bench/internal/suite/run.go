package suite

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/countq"
	"github.com/wqhost/wqhost/bench/internal/engine"
	"github.com/wqhost/wqhost/bench/internal/measure"
	"github.com/wqhost/wqhost/examples/workloads"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// RunOptions describe one end-to-end workload: preload a queue, drain it with a consumer
// whose handler runs a logic on an engine, measure.
type RunOptions struct {
	Backend  Backend       `json:"backend"`
	Consumer consumer.Kind `json:"consumer"`
	Engine   engine.Kind   `json:"engine"`
	Logic    engine.Logic  `json:"logic"`
	Messages int           `json:"messages"`
	Size     int           `json:"size"`    // body bytes (billing uses real transactions)
	Workers  int           `json:"workers"` // listener max workers / naive goroutines
	// Instances is the number of warm handler instances (engine concurrency); default 8.
	Instances int `json:"instances"`
	// Push lets the listener wait on the backend when it can (memory, local).
	Push bool `json:"push"`
	// Timeout bounds the drain; default 5 minutes.
	Timeout time.Duration `json:"-"`
	// Progress is called with the number of messages handled so far, from many goroutines
	// at once.
	Progress func(done int64) `json:"-"`
}

// RunResult is what a workload measured.
type RunResult struct {
	RunOptions
	Handled     int64           `json:"handled"`
	Rejected    int64           `json:"rejected"`
	Seconds     float64         `json:"seconds"`
	MsgPerSec   float64         `json:"msg_per_sec"`
	P50         time.Duration   `json:"handler_p50_ns"`
	P99         time.Duration   `json:"handler_p99_ns"`
	Calls       countq.Snapshot `json:"queue_calls"`
	CallsPerMsg float64         `json:"queue_calls_per_msg"`
	CPUSeconds  float64         `json:"cpu_seconds"`
	CPUPercent  float64         `json:"cpu_percent"`
	RSSBytes    int64           `json:"rss_bytes"`
	// HTTPRequests and HTTPUnanswered are the Azure backend's own counts of storage
	// requests (retries included) and of attempts that got no answer; zero elsewhere.
	HTTPRequests   uint64 `json:"http_requests,omitempty"`
	HTTPUnanswered uint64 `json:"http_unanswered,omitempty"`
	// TimedOut says the drain did not finish within Timeout; the figures cover what was done.
	TimedOut bool `json:"timed_out,omitempty"`
}

// ErrTimedOut is returned (wrapped) by Run when the queue was not drained in time.
var ErrTimedOut = errors.New("workload timed out")

// azureStats is implemented by the Azure backend's queues.
type azureStats interface{ Stats() azure.Stats }

// Bodies returns n message bodies for a logic: valid billing transactions (cycled) or
// text of the given size.
func Bodies(l engine.Logic, n, size int) [][]byte {
	out := make([][]byte, n)
	if l == engine.Billing {
		var valid [][]byte
		for _, b := range workloads.BillingTransactions() {
			if _, err := engine.BillingNative(b); err == nil {
				valid = append(valid, b)
			}
		}
		for i := range out {
			out[i] = valid[i%len(valid)]
		}
		return out
	}
	text := Text(size)
	for i := range out {
		out[i] = text
	}
	return out
}

// Run executes one workload on stores.
func Run(ctx context.Context, stores *Stores, paths engine.Paths, o RunOptions) (RunResult, error) {
	if o.Instances < 1 {
		o.Instances = 8
	}
	if o.Workers < 1 {
		o.Workers = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	res := RunResult{RunOptions: o}
	st, err := stores.Open(ctx, o.Backend)
	if err != nil {
		return res, err
	}
	defer st.Close()
	caller, err := engine.Open(ctx, o.Engine, o.Logic, o.Instances, paths)
	if err != nil {
		return res, err
	}
	defer caller.Close(ctx)
	if err := Preload(ctx, st.Queue, Bodies(o.Logic, o.Messages, o.Size), nil); err != nil {
		return res, err
	}

	var azBefore azure.Stats
	az, isAzure := st.Queue.(azureStats)
	if isAzure {
		azBefore = az.Stats()
	}
	var counts countq.Counts
	q := countq.Wrap(st.Queue, &counts)
	if !o.Push {
		q = countq.WrapPolling(st.Queue, &counts)
	}
	lat := measure.NewLatencies(o.Messages)
	var handled, rejected atomic.Int64
	allDone := make(chan struct{})
	// The semaphore holds calls beyond the engine's instances, so the latency measured is
	// the handler's own and not the wait for a free instance.
	sem := make(chan struct{}, o.Instances)
	h := listener.HandlerFunc(func(ctx context.Context, m *queue.Message) error {
		sem <- struct{}{}
		t0 := time.Now()
		_, err := caller.Call(ctx, m.Body)
		lat.Add(time.Since(t0))
		<-sem
		if errors.Is(err, engine.ErrRejected) {
			rejected.Add(1)
			err = outcome.Reject(err)
		} else if err != nil {
			return err
		}
		n := handled.Add(1)
		if o.Progress != nil {
			o.Progress(n)
		}
		if n == int64(o.Messages) {
			close(allDone)
		}
		return err
	})

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	usage0, wall0 := measure.ReadUsage(), time.Now()
	errc := make(chan error, 1)
	go func() {
		errc <- consumer.Run(runCtx, o.Consumer, consumer.Options{
			Queue: q, DeadLetter: st.DeadLetter, Handler: h, Workers: o.Workers, Push: o.Push,
		})
	}()
	timeout := time.NewTimer(o.Timeout)
	defer timeout.Stop()
	var runErr error
	select {
	case <-allDone:
	case <-timeout.C:
		res.TimedOut = true
		runErr = fmt.Errorf("%s on %s: handled %d of %d messages in %s: %w", o.Consumer, o.Backend, handled.Load(), o.Messages, o.Timeout, ErrTimedOut)
	case err := <-errc:
		return res, fmt.Errorf("%s on %s stopped early: %v", o.Consumer, o.Backend, err)
	case <-ctx.Done():
		runErr = ctx.Err()
	}
	win := measure.Since(usage0, wall0)
	stop()
	if err := <-errc; err != nil && runErr == nil {
		runErr = err
	}
	res.Handled, res.Rejected = handled.Load(), rejected.Load()
	res.Seconds = win.Wall.Seconds()
	if res.Seconds > 0 {
		res.MsgPerSec = float64(res.Handled) / res.Seconds
	}
	res.P50, res.P99 = lat.Percentile(50), lat.Percentile(99)
	res.Calls = counts.Snapshot()
	if res.Handled > 0 {
		res.CallsPerMsg = float64(res.Calls.Transactions) / float64(res.Handled)
	}
	res.CPUSeconds, res.CPUPercent, res.RSSBytes = win.CPU.Seconds(), win.CPUPercent(), win.RSS
	if isAzure {
		after := az.Stats()
		res.HTTPRequests = after.Transactions() - azBefore.Transactions()
		res.HTTPUnanswered = after.Unanswered - azBefore.Unanswered
	}
	return res, runErr
}
