package drain

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/queue"
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
	// Client messages the backend's connection sent: pulls, acks.
	elapsed, calls, sent, err := drainListener(ctx, q, dl, o, func() int64 { return int64(be.Conn().Stats().OutMsgs) })
	if err != nil {
		return Result{}, err
	}
	return result("wqhost-nats", fmt.Sprintf("listener, nats backend (nats-server %s embedded), %d workers max, receive 32, batched acks; %.3f queue API calls per message", server.VERSION, o.Workers, float64(calls)/float64(o.Messages)),
		natsDurability(syncAlways), o.Messages, elapsed, float64(sent), "client messages (pulls, acks)", 0), nil
}
