package drain

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream drains o.Messages from a file-backed work-queue stream on an embedded
// nats-server with a plain pull consumer: nats.go's Consume, a no-op handler, an explicit
// Ack per message after the handler (at least once). syncAlways fsyncs every write
// (sync_always, the durability of synchronous=FULL); without it the server fsyncs every 2
// minutes (its default sync_interval): a process crash of the server loses nothing the OS
// has, a power loss may lose the last 2 minutes.
func JetStream(ctx context.Context, o Options, syncAlways bool) (Result, error) {
	return jetStream(ctx, o, syncAlways, false)
}

// JetStreamDoubleAck is JetStream with wqhost's ack mode: each Ack is a DoubleAck, which
// waits for the server's confirmation before the handler's slot is free again, as wqhost's
// nats backend confirms every ack before a message counts as done.
func JetStreamDoubleAck(ctx context.Context, o Options, syncAlways bool) (Result, error) {
	return jetStream(ctx, o, syncAlways, true)
}

func jetStream(ctx context.Context, o Options, syncAlways, doubleAck bool) (Result, error) {
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
	js, err := jetstream.New(nc)
	if err != nil {
		return Result{}, err
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "DRAIN", Subjects: []string{"drain"}, Storage: jetstream.FileStorage,
		Retention: jetstream.WorkQueuePolicy,
	})
	if err != nil {
		return Result{}, fmt.Errorf("create stream: %w", err)
	}
	if err := preload(js, "drain", o); err != nil {
		return Result{}, err
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "drain", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
	})
	if err != nil {
		return Result{}, fmt.Errorf("create consumer: %w", err)
	}
	handler := func(context.Context, []byte) error { return nil }
	var handled, ackErrs atomic.Int64
	sem := make(chan struct{}, o.Workers) // o.Workers handlers at a time, as the others run
	out0 := nc.Stats().OutMsgs
	start := time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			if handler(ctx, m.Data()) != nil {
				return
			}
			ack := m.Ack
			if doubleAck {
				ack = func() error { return m.DoubleAck(ctx) }
			}
			if ack() != nil {
				ackErrs.Add(1)
				return
			}
			handled.Add(1)
		}()
	})
	if err != nil {
		return Result{}, fmt.Errorf("consume: %w", err)
	}
	err = waitFor(ctx, o.Timeout, func() bool { return handled.Load()+ackErrs.Load() >= int64(o.Messages) },
		func() string { return fmt.Sprintf("%d of %d acked", handled.Load(), o.Messages) })
	cc.Stop()
	// Acks are published without waiting for a reply: the drain ends when the stream,
	// which removes a message on its ack, is empty.
	if err == nil {
		err = waitFor(ctx, o.Timeout, func() bool {
			info, err := st.Info(ctx)
			return err == nil && info.State.Msgs == 0
		}, func() string { return "stream not empty" })
	}
	elapsed := time.Since(start)
	sent := nc.Stats().OutMsgs - out0
	if err != nil {
		return Result{}, err
	}
	if n := ackErrs.Load(); n != 0 {
		return Result{}, fmt.Errorf("%d acks failed", n)
	}
	system, mode := "jetstream", "Ack per message"
	if doubleAck {
		system, mode = "jetstream-doubleack", "DoubleAck per message, confirmed"
	}
	return result(system, fmt.Sprintf("nats-server %s embedded, plain pull consumer (Consume, %s), %d handlers at a time", server.VERSION, mode, o.Workers),
		natsDurability(syncAlways), o.Messages, elapsed, float64(sent), "client messages (pulls, acks)", 0), nil
}

func natsDurability(syncAlways bool) string {
	if syncAlways {
		return "file store, sync_always (fsync per write)"
	}
	return "file store, fsync every 2 min (server default sync_interval)"
}

// startNATS starts an embedded JetStream server storing in dir and connects a client.
func startNATS(dir string, syncAlways bool) (*server.Server, *natsgo.Conn, error) {
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true,
		SyncAlways: syncAlways,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("nats-server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, nil, fmt.Errorf("nats-server not ready within 10s")
	}
	nc, err := natsgo.Connect(s.ClientURL())
	if err != nil {
		s.Shutdown()
		return nil, nil, err
	}
	return s, nc, nil
}

// preload publishes o.Messages bodies to subject, acknowledged by the stream.
func preload(js jetstream.JetStream, subject string, o Options) error {
	for i := range o.Messages {
		if _, err := js.PublishAsync(subject, Body); err != nil {
			return fmt.Errorf("preload message %d: %w", i, err)
		}
		if i%1000 == 999 {
			<-js.PublishAsyncComplete()
		}
	}
	select {
	case <-js.PublishAsyncComplete():
		return nil
	case <-time.After(o.Timeout):
		return fmt.Errorf("preload not acknowledged within %s", o.Timeout)
	}
}
