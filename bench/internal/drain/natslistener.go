package drain

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/queue"
)

// JetStreamListener is JetStream's drain through wqhost: the listener with its default
// configuration on wqhost's nats backend (listener/nats: one durable pull consumer per
// queue, explicit acks, a batch's acks sent together and each confirmed by the server), on
// the same embedded server and stream settings as JetStream, with the same no-op handler.
// The backend's AckWait is its default, 30s, the listener's default visibility timeout, as
// docs/configuration.md advises: with another AckWait each receive sets the lease it asked
// for with one more message (NakWithDelay) per message.
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
	be, err := wqnats.Open(ctx, wqnats.Options{URLs: []string{s.ClientURL()}, CreateQueues: true})
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
	return result("wqhost-nats", fmt.Sprintf("listener, nats backend (nats-server %s embedded), %d workers max, receive 32, acks confirmed per batch; %.3f queue API calls per message", server.VERSION, o.Workers, float64(calls)/float64(o.Messages)),
		natsDurability(syncAlways), o.Messages, elapsed, float64(sent), "client messages (pulls, acks)", 0), nil
}

// natsLine compares the wqhost listener on the nats backend with a plain pull consumer, at
// the server's default durability, in both ack modes: plain-same-ack confirms each ack as
// wqhost does (DoubleAck), plain-default publishes it without waiting (Ack):
//
//	nats drain msg/s: wqhost=N plain-same-ack=Q plain-default=R; wqhost/plain-same-ack=X× wqhost/plain-default=Y×
func natsLine(rows []Result) string {
	w, same, plain := Find(rows, "wqhost-nats", false), Find(rows, "jetstream-doubleack", false), Find(rows, "jetstream", false)
	if w == nil || same == nil || plain == nil {
		return ""
	}
	return fmt.Sprintf("nats drain msg/s: wqhost=%.0f plain-same-ack=%.0f plain-default=%.0f; wqhost/plain-same-ack=%.2f× wqhost/plain-default=%.2f×; client messages/msg %.3f, %.3f, %.3f",
		w.MsgPerSec, same.MsgPerSec, plain.MsgPerSec, w.MsgPerSec/same.MsgPerSec, w.MsgPerSec/plain.MsgPerSec, w.CallsPerMsg, same.CallsPerMsg, plain.CallsPerMsg)
}
