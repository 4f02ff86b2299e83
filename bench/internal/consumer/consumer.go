// Package consumer runs the three ways of draining a queue that the benchmarks compare:
// wqhost's listener (batch receive, auto-scaling workers, random exponential back-off, push
// wake-ups where the backend has them), the naive loop (receive one, process, delete), and a
// fixed 1-second poller (the whitepaper's "default polling interval of 1 second").
package consumer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// Kind names a consumer.
type Kind string

// The consumers compared.
const (
	// Listener is wqhost's listener with the built-in policies.
	Listener Kind = "wqhost-listener"
	// Naive is Workers goroutines that each receive one message, handle it and delete it,
	// sleeping NaiveIdle after an empty receive.
	Naive Kind = "naive-loop"
	// Poller is one goroutine that receives a batch, handles its messages concurrently,
	// deletes them one by one, and sleeps PollInterval after an empty receive.
	Poller Kind = "poller-1s"
)

// Kinds lists every consumer.
var Kinds = []Kind{Listener, Naive, Poller}

// Options configure a consumer.
type Options struct {
	Queue, DeadLetter queue.Queue
	Handler           listener.Handler
	// Workers is the listener's MaxWorkers and the naive loop's goroutine count.
	Workers int
	// BatchSize is the listener's and the poller's receive size; default 32.
	BatchSize int
	// Push lets an idle listener wait on the backend (Waiter) instead of polling.
	Push bool
	// NaiveIdle is the naive loop's sleep after an empty receive; default 100ms.
	NaiveIdle time.Duration
	// PollInterval is the poller's sleep after an empty receive; default 1s.
	PollInterval time.Duration
	// Visibility is the lease taken on receive; default 30s.
	Visibility time.Duration
	Logger     *slog.Logger
}

func (o *Options) defaults() {
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.BatchSize < 1 || o.BatchSize > queue.MaxBatch {
		o.BatchSize = queue.MaxBatch
	}
	if o.NaiveIdle <= 0 {
		o.NaiveIdle = 100 * time.Millisecond
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.Visibility <= 0 {
		o.Visibility = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Run drains o.Queue with consumer k until ctx ends.
func Run(ctx context.Context, k Kind, o Options) error {
	o.defaults()
	switch k {
	case Listener:
		return runListener(ctx, o)
	case Naive:
		return runNaive(ctx, o)
	case Poller:
		return runPoller(ctx, o)
	default:
		return fmt.Errorf("consumer %q: unknown (want one of %v)", k, Kinds)
	}
}

func runListener(ctx context.Context, o Options) error {
	l, err := listener.New(listener.Config{
		Queue: o.Queue, DeadLetter: o.DeadLetter, Handler: o.Handler,
		Backoff:    builtin.NewBackoff(builtin.BackoffOptions{}),
		Scaler:     builtin.NewTarget(int64(o.BatchSize)),
		Poison:     builtin.NewPoison(builtin.PoisonOptions{}),
		MaxWorkers: o.Workers, BatchSize: o.BatchSize, Push: o.Push,
		VisibilityTimeout: o.Visibility, ShutdownGrace: 10 * time.Second,
		Logger: o.Logger,
	})
	if err != nil {
		return err
	}
	return l.Run(ctx)
}

// sleep waits d or until ctx ends, reporting whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// settle deletes a handled message; a failed message is left to reappear when its lease
// ends, which is all a naive consumer does about failures.
func settle(ctx context.Context, o Options, m *queue.Message, res outcome.Outcome) {
	if res.Kind != outcome.KindDone && res.Kind != outcome.KindReject {
		return
	}
	if err := o.Queue.Delete(ctx, m); err != nil {
		o.Logger.Warn("delete", "id", m.ID, "err", err)
	}
}

func runNaive(ctx context.Context, o Options) error {
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				ms, err := o.Queue.Receive(ctx, 1, o.Visibility)
				if err != nil || len(ms) == 0 {
					if !sleep(ctx, o.NaiveIdle) {
						return
					}
					continue
				}
				m := ms[0]
				// Handling and deleting finish even when ctx ends meanwhile, as a
				// graceful consumer would.
				hctx := context.WithoutCancel(ctx)
				settle(hctx, o, m, o.Handler.Handle(hctx, m))
			}
		})
	}
	wg.Wait()
	return nil
}

func runPoller(ctx context.Context, o Options) error {
	for ctx.Err() == nil {
		ms, err := o.Queue.Receive(ctx, o.BatchSize, o.Visibility)
		if err != nil || len(ms) == 0 {
			if !sleep(ctx, o.PollInterval) {
				return nil
			}
			continue
		}
		hctx := context.WithoutCancel(ctx)
		var wg sync.WaitGroup
		for _, m := range ms {
			wg.Go(func() { settle(hctx, o, m, o.Handler.Handle(hctx, m)) })
		}
		wg.Wait()
	}
	return nil
}
