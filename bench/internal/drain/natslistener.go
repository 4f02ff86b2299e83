package drain

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/bench/internal/countq"
	"github.com/wqhost/wqhost/listener"
	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// JetStreamListener is JetStream's drain through wqhost: the listener with its default
// configuration on wqhost's nats backend (listener/nats: one durable pull consumer per
// queue, explicit acks, batched acks for a batch's deletes), on the same embedded server and
// stream settings as JetStream, with the same no-op handler.
func JetStreamListener(ctx context.Context, o Options, syncAlways bool) (Result, error) {
	o.defaults()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(o.Dir)
	s, nc, err := startNATS(o.Dir, syncAlways)
	if err != nil {
		return Result{}, err
	}
	defer s.Shutdown()
	defer nc.Close()
	be, err := wqnats.Open(ctx, wqnats.Options{URLs: []string{s.ClientURL()}, CreateQueues: true, AckWait: time.Minute})
	if err != nil {
		return Result{}, err
	}
	defer be.Close()
	q, err := be.Queue(ctx, "drain")
	if err != nil {
		return Result{}, err
	}
	dl, err := be.Queue(ctx, "drain"+queue.PoisonSuffix)
	if err != nil {
		return Result{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return Result{}, err
	}
	if err := preload(js, q.Subject(), o); err != nil {
		return Result{}, err
	}
	var calls countq.Counts
	l, err := listener.New(listener.Config{
		Queue: countq.Wrap(q, &calls), DeadLetter: dl,
		Handler:    listener.HandlerFunc(func(context.Context, *queue.Message) error { return nil }),
		Backoff:    builtin.NewBackoff(builtin.BackoffOptions{}),
		Scaler:     builtin.NewTarget(0),
		Poison:     builtin.NewPoison(builtin.PoisonOptions{}),
		MaxWorkers: o.Workers,
	})
	if err != nil {
		return Result{}, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	out0 := be.Conn().Stats().OutMsgs
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()
	err = waitFor(ctx, o.Timeout, func() bool { return l.State().Processed >= uint64(o.Messages) },
		func() string { return fmt.Sprintf("%d of %d processed", l.State().Processed, o.Messages) })
	elapsed := time.Since(start)
	sent := be.Conn().Stats().OutMsgs - out0
	cancel()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if err != nil {
		return Result{}, err
	}
	if st := l.State(); st.Failed != 0 || st.LeasesLost != 0 {
		return Result{}, fmt.Errorf("failed %d, leases lost %d; want 0, 0", st.Failed, st.LeasesLost)
	}
	return result("wqhost-nats", fmt.Sprintf("listener, nats backend (nats-server %s embedded), %d workers max, receive 32, batched acks; %.3f queue API calls per message", server.VERSION, o.Workers, float64(calls.Transactions())/float64(o.Messages)),
		natsDurability(syncAlways), o.Messages, elapsed, float64(sent), "client messages (pulls, acks)", 0), nil
}
