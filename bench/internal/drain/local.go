package drain

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wqhost/wqhost/bench/internal/countq"
	"github.com/wqhost/wqhost/internal/diskprobe"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// Local drains o.Messages from wqhost's local store (synchronous=FULL, the default) with
// the listener's default configuration and a no-op handler.
func Local(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Result{}, err
	}
	path := filepath.Join(o.Dir, "wqhost.db")
	commits := diskprobe.Commits(path) // before Open: the hook counts connections opened after it
	be, err := local.Open(ctx, path, local.Options{Sync: local.SyncFull})
	if err != nil {
		return Result{}, err
	}
	defer func() { be.Close(); os.RemoveAll(o.Dir) }()
	q, err := be.Queue(ctx, "drain")
	if err != nil {
		return Result{}, err
	}
	dl, err := be.Queue(ctx, "drain"+queue.PoisonSuffix)
	if err != nil {
		return Result{}, err
	}
	bodies := make([][]byte, 1000)
	for i := range bodies {
		bodies[i] = Body
	}
	for sent := 0; sent < o.Messages; sent += len(bodies) {
		if _, err := q.SendBatch(ctx, bodies[:min(len(bodies), o.Messages-sent)], queue.SendOptions{}); err != nil {
			return Result{}, fmt.Errorf("preload: %w", err)
		}
	}
	elapsed, calls, committed, err := drainListener(ctx, q, dl, o, commits.Load)
	if err != nil {
		return Result{}, err
	}
	if d, err := q.Depth(ctx); err != nil || d != 0 {
		return Result{}, fmt.Errorf("depth after the drain %d (%v), want 0", d, err)
	}
	res := result("wqhost", fmt.Sprintf("listener, local store, %d workers max, receive 32, batched deletes", o.Workers),
		"SQLite WAL, synchronous=FULL (fsync per commit)", o.Messages, elapsed,
		float64(calls), "queue API calls", committed)
	res.SyncsPerMsg = res.CommitsPerMsg
	return res, nil
}

// drainListener drains q with a wqhost listener (no-op handler, built-in policies, o.Workers
// at most) until o.Messages are processed, and returns the time it took, the queue calls
// it made (countq's transactions), and how far the caller's counter moved meanwhile (read just before the listener
// starts and just after the last message is processed). A failed message or a lost lease is
// an error.
func drainListener(ctx context.Context, q, dl queue.Queue, o Options, counter func() int64) (elapsed time.Duration, calls, moved int64, err error) {
	var counts countq.Counts
	l, err := listener.New(listener.Config{
		Queue: countq.Wrap(q, &counts), DeadLetter: dl,
		Handler:    listener.HandlerFunc(func(context.Context, *queue.Message) error { return nil }),
		Backoff:    builtin.NewBackoff(builtin.BackoffOptions{}),
		Scaler:     builtin.NewTarget(0),
		Poison:     builtin.NewPoison(builtin.PoisonOptions{}),
		MaxWorkers: o.Workers,
	})
	if err != nil {
		return 0, 0, 0, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	c0 := counter()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	err = waitFor(ctx, o.Timeout, func() bool { return l.State().Processed >= uint64(o.Messages) },
		func() string { return fmt.Sprintf("%d of %d processed", l.State().Processed, o.Messages) })
	elapsed = time.Since(start)
	moved = counter() - c0
	cancel()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		return 0, 0, 0, err
	}
	if s := l.State(); s.Failed != 0 || s.LeasesLost != 0 {
		return 0, 0, 0, fmt.Errorf("failed %d, leases lost %d; want 0, 0", s.Failed, s.LeasesLost)
	}
	return elapsed, counts.Transactions(), moved, nil
}
