package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/wqhost/wqhost/examples/workloads"
	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

// The binding of the embedded default that the demo feeds.
const (
	demoTenant  = config.DefaultTenant
	demoBinding = "billing"
)

// demoPoll is how often the demo reads the queue depths for its progress bar.
const demoPoll = 20 * time.Millisecond

// demoQueues are the three queues the demo watches, on the host's own backend.
type demoQueues struct {
	in, out, dead queue.Queue
}

func (q demoQueues) depths(ctx context.Context) (in, out, dead int64, err error) {
	if in, err = q.in.Depth(ctx); err != nil {
		return
	}
	if out, err = q.out.Depth(ctx); err != nil {
		return
	}
	dead, err = q.dead.Depth(ctx)
	return
}

// demo is `wqhost run --demo`: it loads the shipped billing sample into the default
// binding's queue, runs the host until the queue is empty, and prints what happened.
func (c *cli) demo(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	bc, err := cfg.Binding(demoTenant, demoBinding)
	if err != nil {
		return &usageError{err: fmt.Errorf("--demo needs the embedded default's binding: %w", err)}
	}
	if bc.Output == "" {
		return &usageError{err: fmt.Errorf("--demo: tenants.%s.bindings.%s has no output queue", demoTenant, demoBinding)}
	}
	h, err := host.New(ctx, cfg, logger)
	if err != nil {
		return &usageError{err: err}
	}
	var qs demoQueues
	for _, o := range []struct {
		dst  *queue.Queue
		name string
	}{{&qs.in, bc.Queue}, {&qs.out, bc.Output}, {&qs.dead, bc.Queue + queue.PoisonSuffix}} {
		if *o.dst, err = h.OpenQueue(ctx, demoTenant, o.name); err != nil {
			h.Close(context.Background())
			return err
		}
	}
	_, out0, dead0, err := qs.depths(ctx)
	if err != nil {
		h.Close(context.Background())
		return err
	}

	msgs := workloads.BillingTransactions()
	fmt.Fprintf(c.stdout, "wqhost demo: %d billing transactions (%d malformed) -> %s -> billing-go.wasm -> %s\n",
		len(msgs), workloads.BillingMalformed, bc.Queue, bc.Output)
	fmt.Fprintf(c.stdout, "data dir %s\n", cfg.DataDir)
	if err := sendAll(ctx, qs.in, msgs); err != nil {
		h.Close(context.Background())
		return fmt.Errorf("load the sample into %s: %w", bc.Queue, err)
	}
	total, _, _, err := qs.depths(ctx)
	if err != nil {
		h.Close(context.Background())
		return err
	}

	runCtx, stopHost := context.WithCancel(ctx)
	defer stopHost()
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- h.Run(runCtx) }()

	bar := c.progress(int(total), "billing")
	tick := time.NewTicker(demoPoll)
	defer tick.Stop()
	var in, out, dead int64
	var elapsed time.Duration
	var runErr error
	hostDone := false
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case runErr = <-ran:
			hostDone = true
			break wait
		case <-tick.C:
		}
		if in, out, dead, err = qs.depths(ctx); err != nil {
			if ctx.Err() != nil {
				break wait
			}
			stopHost()
			<-ran
			return err
		}
		bar.Set64(total - in)
		if in == 0 || sampleSettled(ctx, qs.in, out-out0+dead-dead0, len(msgs)) {
			elapsed = time.Since(start)
			break
		}
	}
	bar.Finish()
	if hostDone {
		return fmt.Errorf("the host stopped before the sample was processed: %w", errors.Join(runErr, errors.New("no error reported")))
	}
	interrupted := ctx.Err() != nil
	if interrupted {
		elapsed = time.Since(start)
	}
	var bs host.BindingStatus
	for _, t := range h.Status(context.Background()).Tenants {
		for _, b := range t.Bindings {
			if t.Name == demoTenant && b.Name == demoBinding {
				bs = b
			}
		}
	}
	sample := peek(context.Background(), qs.out, 1)
	leftNote := delayedNote(qs.in, in)
	reasons := peek(context.Background(), qs.dead, 3)
	stopHost()
	if err := <-ran; err != nil {
		return fmt.Errorf("host shutdown: %w", err)
	}

	processed, poisoned := out-out0, dead-dead0
	settled := total - in
	fmt.Fprintln(c.stdout)
	fmt.Fprintf(c.stdout, "processed  %d (priced lines written to %s)\n", processed, bc.Output)
	fmt.Fprintf(c.stdout, "poisoned   %d (rejected by the handler, in %s%s)\n", poisoned, bc.Queue, queue.PoisonSuffix)
	fmt.Fprintf(c.stdout, "failed     %d handler failures, %d retries (%d messages left in %s%s)\n", bs.Failed, bs.Retried, in, bc.Queue, leftNote)
	fmt.Fprintf(c.stdout, "time       %s, %.0f msg/s\n", elapsed.Round(time.Millisecond), float64(settled)/elapsed.Seconds())
	fmt.Fprintf(c.stdout, "outputs    %d in %s in total\n", out, bc.Output)
	for _, m := range sample {
		fmt.Fprintf(c.stdout, "  e.g. %s\n", m.Body)
	}
	if len(reasons) > 0 {
		fmt.Fprintf(c.stdout, "dead letters, e.g.:\n")
		for _, m := range reasons {
			fmt.Fprintf(c.stdout, "  %s\n", oneLine(m.Attributes[queue.AttrReason], 110))
		}
		fmt.Fprintf(c.stdout, "see them all: wqhost poison list --data-dir %s --queue %s\n", cfg.DataDir, bc.Queue)
	}
	if interrupted {
		return errors.New("interrupted before the sample was processed")
	}
	return nil
}

// sampleSettled reports whether the demo can stop before its input queue is empty: as many
// messages were settled (an output or a dead letter each) as the sample holds, and what
// is left is all delayed, none visible or leased: a message sent with --delay, or a retry
// of an earlier run's, which the demo would otherwise wait out for as long as its delay.
func sampleSettled(ctx context.Context, in queue.Queue, settled int64, sample int) bool {
	c, ok := queue.As[queue.Counter](in)
	if !ok || settled < int64(sample) {
		return false
	}
	n, err := c.Counts(ctx)
	return err == nil && n.Visible == 0 && n.Leased == 0
}

// delayedNote says how many of the messages left are delayed, when the backend knows.
func delayedNote(in queue.Queue, left int64) string {
	c, ok := queue.As[queue.Counter](in)
	if !ok || left == 0 {
		return ""
	}
	n, err := c.Counts(context.Background())
	if err != nil || n.Delayed == 0 {
		return ""
	}
	return fmt.Sprintf(", %d of them delayed: a running host handles them when they are due", n.Delayed)
}

// sendAll enqueues msgs in batches where the backend supports it.
func sendAll(ctx context.Context, q queue.Queue, msgs [][]byte) error {
	bs, batched := q.(batchSender)
	for i := 0; i < len(msgs); {
		if !batched {
			if _, err := q.Send(ctx, msgs[i], queue.SendOptions{}); err != nil {
				return err
			}
			i++
			continue
		}
		n := min(sendChunk, len(msgs)-i)
		if _, err := bs.SendBatch(ctx, msgs[i:i+n], queue.SendOptions{}); err != nil {
			return err
		}
		i += n
	}
	return nil
}

// peek leases up to n messages and releases them at once: a look that leaves them in place.
func peek(ctx context.Context, q queue.Queue, n int) []*queue.Message {
	ms, err := q.Receive(ctx, n, time.Minute)
	if err != nil {
		return nil
	}
	for _, m := range ms {
		_ = q.UpdateVisibility(ctx, m, 0)
	}
	return ms
}
