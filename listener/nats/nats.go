// Package nats is a queue.Backend on NATS JetStream, the self-hosted distributed queue: many
// wqhost hosts share one queue, and an R3 stream survives the loss of a node.
//
// Each queue is one stream (work-queue retention) with one subject, consumed through one
// shared durable pull consumer with explicit acks. The lease model maps onto JetStream's ack
// model:
//
//	lease (visibility timeout)   AckWait of the durable consumer (a Receive with another
//	                             visibility sets the message's lease with NakWithDelay)
//	renew                        InProgress (+WPI), or NakWithDelay(d) for another length
//	retry after d / release      NakWithDelay(d) / Nak
//	release unstarted            a copy carrying the deliveries counted, the original acked
//	                             (release.go); in an order group: Nak, the release counted
//	                             in a key-value bucket beside the stream (released.go)
//	delete on success            Ack, double-acked (the server confirms it); a batch's acks
//	                             go out together, their confirmations collected on one inbox
//	dead-letter with reason      publish the original, with its headers and the reason
//	                             headers, to the poison queue's stream (deduplicated by
//	                             Nats-Msg-Id), then Term
//	dequeue count                NumDelivered of the message metadata, less the releases
//	                             that did not start the handler
//	push wake-up                 one held pull request (long-poll Fetch with heartbeats)
//
// MaxDeliver is unlimited: the server never drops a message on its own; the listener's poison
// policy dead-letters it by its dequeue count. The consumer's MaxAckPending is unlimited too,
// so messages waiting for a delayed retry never hold back new ones.
//
// A lease token is valid only in the process that received the message: this process refuses
// (ErrLeaseLost) a delete or an update with a stale token or after the lease expired. The
// server itself does not tell deliveries of one message apart, so a host whose lease ran out
// without it noticing may still ack a copy redelivered to another host; that host then
// handles a duplicate, which is the at-least-once contract.
//
// Delayed sends and time-to-live are headers (Wqhost-Not-Before, Wqhost-Expires): a delayed
// message delivered early goes back with NakWithDelay for the time left, and counts that one
// early delivery out of its dequeue count; an expired one is acked without being handed out.
//
// Ordered execution groups map onto subjects (<subject>.o.<group>), each consumed through a
// durable consumer of its own, for the queues named in Options.Ordered (see ordered.go).
// Their releases are counted in the bucket <stream>_released: a release costs one
// compare-and-set write there before its Nak (and a read after a conflict), a redelivered
// group message (NumDelivered > 1) one read on receive, and the ack of a message released
// before one delete; a first delivery and its ack cost nothing more, and a queue finds (or
// makes) the bucket once. A bucket that fails makes a release a plain Nak.
// Settlements the server does not confirm are sent again while the lease lasts, so a failover
// of the consumer's leader does not redeliver what was handled (see ackLease).
//
// Counts splits the depth from the consumer's NumPending (visible) and NumAckPending
// (leased, or waiting for a NakWithDelay retry); the server does not tell a delayed send
// apart, so Delayed counts the delayed sends this process pulled early and sent back (see
// Counts for the approximation).
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/listener/queue"
)

// Options configure a Backend.
type Options struct {
	// URLs are the servers to connect to (nats://host:port); the client fails over between
	// them and learns the rest of the cluster from the server.
	URLs []string
	// Conn are extra client options: credentials, NKey, TLS, name. Open adds reconnect
	// options of its own after them.
	Conn []natsgo.Option
	// CreateQueues creates a queue's stream on first use; otherwise Open fails when the stream
	// does not exist. The durable consumer is always created (or updated) by Open.
	CreateQueues bool
	// Replicas is the replica count of created streams (1, 3 or 5); 0 means 1.
	Replicas int
	// AdoptStreams uses an existing stream as it is. Without it Open refuses a stream whose
	// retention is not work-queue, and raises the replicas of one with fewer than Replicas
	// (refusing it when the server cannot): see checkStream.
	AdoptStreams bool
	// MemoryStorage keeps created streams in memory instead of on disk (tests).
	MemoryStorage bool
	// StreamPrefix names the stream of a queue that Queues does not name: prefix + the queue
	// name, bytes other than letters, digits and '-' escaped as _XX. Default "WQ_".
	StreamPrefix string
	// SubjectPrefix forms the subject of a queue that Queues does not name: prefix + queue.
	// Default "wqhost.q.".
	SubjectPrefix string
	// Queues binds named queues to existing (or chosen) streams and subjects.
	Queues map[string]QueueBinding
	// Ordered names the queues read in ordered mode (ordered.go): their order keys route
	// messages to group subjects, which their streams capture (<subject>.o.*). A stream
	// created by the backend gets that subject; an existing one is given it when
	// CreateQueues is on and the stream is the queue's own, else Open fails naming it.
	Ordered map[string]bool
	// Consumer is the name of the shared durable consumer. Default "wqhost".
	Consumer string
	// AckWait is the consumer's AckWait: the lease of a received message when the receive
	// asks for the same visibility. Default 30s; set it to the bindings' visibility timeout.
	AckWait time.Duration
	// PullHold is how long one held pull request waits for a message while the queue is
	// idle before it is re-armed. Default 15m (4 requests per idle hour).
	PullHold time.Duration
	// PullHeartbeat is the server's heartbeat on a held pull: a pull lost with its server
	// is noticed after two missed heartbeats and re-armed (a reconnect re-arms it at once).
	// Default 5s.
	PullHeartbeat time.Duration
	// Logger receives reconnect and pull errors; nil discards them.
	Logger *slog.Logger
}

// QueueBinding names the stream and subject of one queue.
type QueueBinding struct {
	// Stream is the stream's name.
	Stream string
	// Subject is the subject messages are published to and consumed from. Default: the
	// stream's first subject when the stream exists, else SubjectPrefix + queue.
	Subject string
}

// Backend opens queues on one NATS connection. It is safe for concurrent use.
type Backend struct {
	opts Options
	nc   *natsgo.Conn
	js   jetstream.JetStream
	log  *slog.Logger

	mu     sync.Mutex
	queues map[string]*Queue
	closed bool
}

var (
	_ queue.Backend        = (*Backend)(nil)
	_ queue.Queue          = (*Queue)(nil)
	_ queue.Batcher        = (*Queue)(nil)
	_ queue.Waiter         = (*Queue)(nil)
	_ queue.Watcher        = (*Queue)(nil)
	_ queue.FuncWatcher    = (*Queue)(nil)
	_ queue.Renewer        = (*Queue)(nil)
	_ queue.Mover          = (*Queue)(nil)
	_ queue.Peeker         = (*Queue)(nil)
	_ queue.MessageLimiter = (*Queue)(nil)
	_ queue.Counter        = (*Queue)(nil)
)

// Open connects to the servers of opts.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	if len(opts.URLs) == 0 {
		return nil, errors.New("nats: no server urls")
	}
	if opts.StreamPrefix == "" {
		opts.StreamPrefix = "WQ_"
	}
	if opts.SubjectPrefix == "" {
		opts.SubjectPrefix = "wqhost.q."
	}
	if opts.Consumer == "" {
		opts.Consumer = "wqhost"
	}
	if opts.AckWait <= 0 {
		opts.AckWait = 30 * time.Second
	}
	if opts.PullHold <= 0 {
		opts.PullHold = 15 * time.Minute
	}
	if opts.PullHeartbeat <= 0 {
		opts.PullHeartbeat = 5 * time.Second
	}
	if opts.PullHeartbeat*2 >= opts.PullHold {
		return nil, fmt.Errorf("nats: pull_heartbeat %s must be below half of pull_hold %s", opts.PullHeartbeat, opts.PullHold)
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A hung server (SIGSTOP, a paused VM) keeps the connection open and answers nothing:
	// the client's pings notice it after PingInterval × (MaxPingsOutstanding+1), 4-6 s here
	// instead of the client's default 6 minutes, and it moves to another node, while the
	// others could serve all along (a ping every 2 s is a few bytes). A queue's recovery
	// probe may notice sooner (recover.go). opts.Conn may set its own.
	copts := []natsgo.Option{natsgo.PingInterval(2 * time.Second), natsgo.MaxPingsOutstanding(2)}
	copts = append(copts, opts.Conn...)
	copts = append(copts,
		natsgo.MaxReconnects(-1),
		natsgo.RetryOnFailedConnect(false),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			if err != nil {
				log.Warn("nats: disconnected", "err", err)
			}
		}),
	)
	b := &Backend{opts: opts, log: log, queues: map[string]*Queue{}}
	copts = append(copts, natsgo.ReconnectHandler(func(c *natsgo.Conn) {
		log.Info("nats: reconnected", "server", c.ConnectedUrlRedacted())
		b.mu.Lock()
		qs := make([]*Queue, 0, len(b.queues))
		for _, q := range b.queues {
			qs = append(qs, q)
		}
		b.mu.Unlock()
		for _, q := range qs {
			q.reconnected()
		}
	}))
	nc, err := natsgo.Connect(strings.Join(opts.URLs, ","), copts...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %w", strings.Join(opts.URLs, ","), unavailable(err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream account info (is JetStream enabled? does the cluster have a meta leader?): %w", unavailable(err))
	}
	b.nc, b.js = nc, js
	return b, nil
}

// Conn returns the backend's connection (tests, and the interop check).
func (b *Backend) Conn() *natsgo.Conn { return b.nc }

// streamName escapes a queue name into a stream name: letters, digits and '-' stay, every
// other byte becomes _XX (hex), so two queue names never share a stream ("a.b" is a_2Eb,
// "a_b" is a_5Fb).
func streamName(queue string) string {
	var sb strings.Builder
	for i := 0; i < len(queue); i++ {
		c := queue[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			sb.WriteByte(c)
			continue
		}
		fmt.Fprintf(&sb, "_%02X", c)
	}
	return sb.String()
}

// binding returns the stream and subject of queue name.
func (b *Backend) binding(name string) QueueBinding {
	qb := b.opts.Queues[name]
	if qb.Stream == "" {
		qb.Stream = b.opts.StreamPrefix + streamName(name)
	}
	return qb
}

// Open returns the named queue, creating its stream when CreateQueues is on, and its
// durable consumer.
func (b *Backend) Open(ctx context.Context, name string) (queue.Queue, error) {
	return b.Queue(ctx, name)
}

// Queue is Open with the concrete type.
func (b *Backend) Queue(ctx context.Context, name string) (*Queue, error) {
	if name == "" || strings.ContainsAny(name, " \t\r\n*>") {
		return nil, fmt.Errorf("nats: open queue %q: a queue name must be non-empty and hold no space, '*' or '>'", name)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("nats: open queue %q: backend closed", name)
	}
	if q, ok := b.queues[name]; ok {
		b.mu.Unlock()
		return q, nil
	}
	b.mu.Unlock()

	qb := b.binding(name)
	var stream jetstream.Stream
	err := retryAPI(ctx, func(ctx context.Context) (err error) {
		stream, err = b.js.Stream(ctx, qb.Stream)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && b.opts.CreateQueues:
		if qb.Subject == "" {
			qb.Subject = b.opts.SubjectPrefix + name
		}
		subjects := []string{qb.Subject}
		if b.opts.Ordered[name] {
			subjects = append(subjects, qb.Subject+".o.*")
		}
		cfg := jetstream.StreamConfig{
			Name:       qb.Stream,
			Subjects:   subjects,
			Retention:  jetstream.WorkQueuePolicy,
			Storage:    jetstream.FileStorage,
			Replicas:   b.opts.Replicas,
			Duplicates: 2 * time.Minute,
		}
		if b.opts.MemoryStorage {
			cfg.Storage = jetstream.MemoryStorage
		}
		err = retryAPI(ctx, func(ctx context.Context) (err error) {
			stream, err = b.js.CreateOrUpdateStream(ctx, cfg)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("nats: create stream %s for queue %q: %w", qb.Stream, name, unavailable(err))
		}
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("nats: queue %q: stream %s does not exist (turn create_queues on, or create it): %w", name, qb.Stream, queue.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("nats: queue %q: stream %s: %w", name, qb.Stream, unavailable(err))
	default:
		if stream, err = b.checkStream(ctx, name, stream); err != nil {
			return nil, err
		}
	}
	info := stream.CachedInfo()
	if qb.Subject == "" {
		if len(info.Config.Subjects) == 0 {
			return nil, fmt.Errorf("nats: queue %q: stream %s has no subjects; name one in the binding", name, qb.Stream)
		}
		qb.Subject = info.Config.Subjects[0]
	}
	if strings.ContainsAny(qb.Subject, "*>") {
		return nil, fmt.Errorf("nats: queue %q: subject %q is a wildcard; a queue publishes to one subject", name, qb.Subject)
	}
	groups := qb.Subject + ".o.*"
	if b.opts.Ordered[name] && !slices.Contains(info.Config.Subjects, groups) && !slices.Contains(info.Config.Subjects, qb.Subject+".>") {
		own := info.Config.Retention == jetstream.WorkQueuePolicy && slices.Equal(info.Config.Subjects, []string{qb.Subject})
		if !b.opts.CreateQueues || !own {
			return nil, fmt.Errorf("nats: queue %q is ordered: its stream %s must capture the group subjects %s (add the subject, or turn create_queues on for a stream of the queue's own)", name, qb.Stream, groups)
		}
		cfg := info.Config
		cfg.Subjects = append(cfg.Subjects, groups)
		if stream, err = b.js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("nats: queue %q is ordered: add the group subjects %s to stream %s: %w", name, groups, qb.Stream, err)
		}
		info = stream.CachedInfo()
	}
	var cons jetstream.Consumer
	err = retryAPI(ctx, func(ctx context.Context) (err error) {
		cons, err = stream.CreateOrUpdateConsumer(ctx, consumerConfig(b.opts, qb.Subject))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nats: queue %q: durable consumer %s on stream %s: %w", name, b.opts.Consumer, qb.Stream, unavailable(err))
	}
	maxPayload := int(b.nc.MaxPayload())
	if info.Config.MaxMsgSize > 0 && int(info.Config.MaxMsgSize) < maxPayload {
		maxPayload = int(info.Config.MaxMsgSize)
	}
	q := &Queue{name: name, b: b, stream: stream, cons: cons, subject: qb.Subject, streamName: qb.Stream,
		maxPayload: maxPayload, leases: map[string]*lease{}, groups: map[int64]bool{}, quit: make(chan struct{}), ordered: b.opts.Ordered[name],
		ownStream: info.Config.Retention == jetstream.WorkQueuePolicy && (slices.Equal(info.Config.Subjects, []string{qb.Subject}) ||
			slices.Equal(info.Config.Subjects, []string{qb.Subject, groups}))}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, fmt.Errorf("nats: open queue %q: backend closed", name)
	}
	if old, ok := b.queues[name]; ok {
		return old, nil
	}
	b.queues[name] = q
	return q, nil
}

// consumerConfig is the shared durable consumer of a queue's subject.
func consumerConfig(o Options, subject string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       o.Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: -1,
		FilterSubject: subject,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      0, // the stream's
	}
}

// apiTry bounds one JetStream API request of retryAPI, apiRetryFor all of its tries.
const (
	apiTry      = 5 * time.Second
	apiRetryFor = 30 * time.Second
)

// retryAPI runs a JetStream API request until it is answered: a request that times out or
// finds no responder, or that a cluster still forming refuses (clusterForming), is tried
// again for up to apiRetryFor (ctx permitting). Right after a node restarts, an R3 stream or
// consumer may be without a leader for a moment and its info requests go unanswered; a
// command run then waits for the election instead of failing.
func retryAPI(ctx context.Context, fn func(context.Context) error) error {
	start := time.Now()
	for {
		rctx, cancel := context.WithTimeout(ctx, apiTry)
		err := fn(rctx)
		cancel()
		retry := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, natsgo.ErrNoResponders) || errors.Is(err, natsgo.ErrTimeout) || clusterForming(err)
		if !retry || ctx.Err() != nil || time.Since(start) > apiRetryFor {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// clusterForming reports a JetStream API error a cluster gives while its nodes are still
// coming up: 10005, no suitable peers for placement (a peer not yet known to be online, so
// an R3 stream cannot be placed: a host started beside a restarting cluster failed its
// start on it), and 10008, JetStream system temporarily unavailable.
func clusterForming(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == 10005 || apiErr.ErrorCode == 10008)
}

// Close gives back the messages held by idle pulls and closes the connection.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	qs := make([]*Queue, 0, len(b.queues))
	for _, q := range b.queues {
		qs = append(qs, q)
	}
	b.mu.Unlock()
	for _, q := range qs {
		q.close()
	}
	// The flush sends the naks of the held messages before the connection closes.
	_ = b.nc.FlushTimeout(2 * time.Second)
	b.nc.Close()
	return nil
}
