package nats

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/internal/wake"
	"github.com/wqhost/wqhost/listener/queue"
)

// Headers the backend writes for itself; they are not attributes.
const (
	hdrNotBefore = "Wqhost-Not-Before" // unix nanoseconds before which the message is not handed out
	hdrExpires   = "Wqhost-Expires"    // unix nanoseconds after which it is dropped
	hdrMsgID     = "Nats-Msg-Id"       // JetStream's deduplication id
	// hdrEncoded lists (comma-separated) the attributes whose values are base64, because
	// a header value cannot hold them literally (a line break, surrounding spaces).
	hdrEncoded = "Wqhost-Encoded"
)

// headerRoom is what MaxMessageBytes keeps free of the server's max payload for headers:
// attributes (dead-letter metadata, the original's headers) and the subject.
const headerRoom = 8 << 10

// Queue is one queue: a stream's subject and the shared durable consumer on it.
type Queue struct {
	name       string
	b          *Backend
	stream     jetstream.Stream
	cons       jetstream.Consumer
	subject    string
	streamName string
	maxPayload int
	ownStream  bool          // a work-queue stream of this queue's subject (and its groups) alone
	ordered    bool          // order keys route to group subjects (Options.Ordered)
	gen        atomic.Uint64 // lease token generations
	pulls      atomic.Int64  // held pull requests issued
	// recov wakes the listener's error back-off (recover.go); probing is set while a probe
	// runs; quit is closed by close.
	recov   wake.Set
	probing atomic.Bool
	// unanswered: the last pull got no answer in time; the next waits answerWaitFailing.
	unanswered atomic.Bool
	quit       chan struct{}

	mu       sync.Mutex
	leases   map[string]*lease    // by message id: the leases this process holds
	held     []heldMsg            // delivered to a held pull, not yet received
	wake     wake.Set             // the waiters until the next message or local write
	hint     bool                 // a local write since the last empty receive: a message may be visible
	hintGen  uint64               // counts hints
	due      time.Time            // the earliest delayed message this process knows of
	early    map[uint64]time.Time // delayed sends this process sent back, by sequence: when due
	groups   map[int64]bool       // order groups whose consumer this process made sure of
	groupSub *natsgo.Subscription // wakes watches on a group publish (ordered, while pulling)
	// groupHint: a group publish (or the subscription's start) may have made a message
	// visible that the held pull does not bring; groupHintAt is when it was set.
	groupHint   bool
	groupHintAt time.Time
	rel         releaseCounts // the bucket counting releases of group messages (released.go)
	watchers    int           // watches not stopped
	pulling     bool          // the held-pull goroutine runs
	closing     bool
	stopPull    context.CancelFunc
	// cancelHeld ends the current held pull's Fetch (a reconnect re-arms it).
	cancelHeld context.CancelFunc
}

type lease struct {
	reply string // the delivery's ack subject
	token string
	until time.Time
	body  []byte      // a body handed out as unread (Oversize), for its dead letter
	msg   *natsgo.Msg // the delivered message, for a Release's copy (release.go)
	// The delivery's stream sequence, store time and NumDelivered, and its releases as the
	// receive read them (released.go).
	seq          uint64
	at           time.Time
	delivered    uint64
	releases     int
	releasesRev  uint64
	releasesRead bool
}

// The ack protocol, published to a delivery's reply subject. The client's own ack methods
// refuse a second one on a message (a lease set with NakWithDelay and then acked), so the
// backend speaks the protocol itself.
var (
	ackAck      = []byte("+ACK")
	ackNak      = []byte("-NAK")
	ackProgress = []byte("+WPI")
)

func nakDelay(d time.Duration) []byte { return fmt.Appendf(nil, `-NAK {"delay": %d}`, d.Nanoseconds()) }

func term(reason string) []byte { return []byte("+TERM " + reason) }

// ackSync sends one ack command and waits for the server's confirmation, so the next pull
// already sees its effect (a released message at the head).
func (q *Queue) ackSync(ctx context.Context, reply string, cmd []byte) error {
	if reply == "" {
		return fmt.Errorf("nats: %s: delivery without an ack subject", q.name)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	_, err := q.b.nc.RequestWithContext(ctx, reply, cmd)
	return err
}

// Retrying a settlement: one try waits ackTry for the server's confirmation; a failed one
// (the consumer's leader lost with its node, no responder while a new one is elected) is
// sent again every ackRetryWait while the lease lasts.
const (
	ackTry       = 2 * time.Second
	ackRetryWait = 200 * time.Millisecond
)

// ackLease sends cmd for lease l until the server confirms it, retrying while the lease lasts
// and ctx allows. The delivery's ack subject outlives the consumer's leader: every leader
// listens on it, so after a failover the new leader takes the retry and the message is not
// redelivered (a duplicate) for an ack the old leader never replicated. A second copy of an
// ack that did land is confirmed again and changes nothing.
func (q *Queue) ackLease(ctx context.Context, l *lease, cmd []byte) error {
	for {
		actx, cancel := context.WithTimeout(ctx, ackTry)
		err := q.ackSync(actx, l.reply, cmd)
		cancel()
		if err == nil || ctx.Err() != nil || !time.Now().Add(ackRetryWait).Before(l.until) {
			return err
		}
		q.b.log.Debug("nats: settlement not confirmed; retrying", "queue", q.name, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(ackRetryWait):
		}
	}
}

// ack publishes one ack command for a delivery.
func (q *Queue) ack(reply string, cmd []byte) error {
	if reply == "" {
		return fmt.Errorf("nats: %s: delivery without an ack subject", q.name)
	}
	return q.b.nc.Publish(reply, cmd)
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Stream returns the name of the queue's stream.
func (q *Queue) Stream() string { return q.streamName }

// Subject returns the subject the queue publishes to.
func (q *Queue) Subject() string { return q.subject }

// MaxMessageBytes is the largest body Send accepts: the server's max payload (or the
// stream's max message size, if smaller) less room for the headers.
func (q *Queue) MaxMessageBytes() int { return q.maxPayload - headerRoom }

// HeldPulls returns how many held pull requests the queue has issued (the idle cost).
func (q *Queue) HeldPulls() int64 { return q.pulls.Load() }

// Receive leases up to max visible messages: first those a held pull already brought, then
// one no-wait pull for the rest.
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*queue.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nats: receive from %s: %w", q.name, err)
	}
	if max < 1 {
		return nil, fmt.Errorf("nats: receive from %s: max %d < 1", q.name, max)
	}
	max = min(max, queue.MaxBatch)
	out := q.takeHeld(max, visibility)
	if len(out) == max {
		return out, nil
	}
	q.mu.Lock()
	gen, hint := q.hintGen, q.hint
	q.mu.Unlock()
	start := time.Now()
	want := max - len(out)
	ds, err := q.fetch(ctx, want, 0)
	if len(ds) == 0 && err == nil && hint {
		// A pull that may not wait answers "no messages" when the consumer has not yet
		// counted a message just published. After a local write, one more pull waits a
		// little for one message (JetStream holds a no-wait pull with an expiry until its
		// batch is full, so it asks for one).
		ds, err = q.fetch(ctx, 1, 200*time.Millisecond)
	}
	for _, d := range ds {
		if m := q.admit(d, start, visibility, false); m != nil {
			out = append(out, m)
		}
	}
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("nats: receive from %s: %w", q.name, err)
	}
	if len(ds) < want {
		q.mu.Lock()
		if q.hintGen == gen {
			q.hint = false
		}
		q.mu.Unlock()
	}
	if out == nil {
		out = []*queue.Message{}
	}
	return out, nil
}

// admit turns a delivered message into a leased one, or returns nil after sending back one
// delayed (NakWithDelay for the time left) or dropping one expired. start is when the pull
// was asked for: the server's AckWait began after it. held says the message waited in a
// held pull, whose lease must be set afresh.
func (q *Queue) admit(msg delivery, start time.Time, visibility time.Duration, held bool) *queue.Message {
	h := msg.Headers()
	now := time.Now()
	var err error
	if exp, ok := unixHeader(h, hdrExpires); ok && !now.Before(exp) {
		if err := q.ack(msg.Reply(), ackAck); err != nil {
			q.b.log.Warn("nats: drop expired message", "queue", q.name, "seq", msg.seq, "err", err)
		}
		return nil
	}
	dc := int(msg.received)
	if nb, ok := unixHeader(h, hdrNotBefore); ok {
		if now.Before(nb) {
			_ = q.ack(msg.Reply(), nakDelay(nb.Sub(now)))
			q.noteDue(nb)
			if msg.received == 1 {
				q.sentBack(msg.seq, nb)
			}
			return nil
		}
		if dc > 1 {
			dc-- // the early delivery that sent it back
		}
	}
	dc += priorDeliveries(h)     // a copy made by Release carries its original's count
	dc = max(dc-msg.releases, 1) // a group message's releases (released.go)
	until := start.Add(visibility)
	switch {
	case visibility != q.b.opts.AckWait:
		err = q.ack(msg.Reply(), nakDelay(visibility))
		until = now.Add(visibility)
	case held:
		err = q.ack(msg.Reply(), ackProgress)
		until = now.Add(visibility)
	}
	if err != nil {
		q.b.log.Warn("nats: set lease", "queue", q.name, "seq", msg.seq, "err", err)
		return nil
	}
	id := strconv.FormatUint(msg.seq, 10)
	token := strconv.Itoa(dc) + "." + strconv.FormatUint(q.gen.Add(1), 36)
	q.mu.Lock()
	q.leases[id] = &lease{reply: msg.Reply(), token: token, until: until, msg: msg.msg, seq: msg.seq, at: msg.at,
		delivered: msg.received, releases: msg.releases, releasesRev: msg.releasesRev, releasesRead: msg.releasesRead}
	q.mu.Unlock()
	return &queue.Message{
		ID:           id,
		Queue:        q.name,
		Body:         msg.msg.Data,
		DequeueCount: dc,
		InsertedAt:   msg.at,
		LeaseToken:   token,
		VisibleAt:    until,
		Attributes:   attributesOf(h),
	}
}

func unixHeader(h natsgo.Header, key string) (time.Time, bool) {
	v := h.Get(key)
	if v == "" {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// attributesOf returns a message's headers as attributes (the first value of each), without
// the backend's own and the server's (Nats-*).
func attributesOf(h natsgo.Header) map[string]string {
	var out map[string]string
	for k, vs := range h {
		if len(vs) == 0 || reserved(k) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(h))
		}
		out[k] = vs[0]
	}
	if enc := h.Get(hdrEncoded); enc != "" {
		for _, k := range strings.Split(enc, ",") {
			if v, ok := out[k]; ok {
				if b, err := base64.StdEncoding.DecodeString(v); err == nil {
					out[k] = string(b)
				}
			}
		}
	}
	return out
}

// literal reports whether v can be a header value as it is.
func literal(v string) bool {
	return !strings.ContainsAny(v, "\r\n") && strings.TrimSpace(v) == v
}

func reserved(k string) bool {
	return strings.HasPrefix(k, "Nats-") || strings.HasPrefix(k, "Wqhost-")
}

// leaseOf returns the live lease m holds; remove takes it out of the table.
func (q *Queue) leaseOf(m *queue.Message, remove bool) (*lease, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l, ok := q.leases[m.ID]
	if !ok || l.token != m.LeaseToken {
		return nil, fmt.Errorf("nats: message %s in %s: %w", m.ID, q.name, queue.ErrLeaseLost)
	}
	if !time.Now().Before(l.until) {
		delete(q.leases, m.ID)
		return nil, fmt.Errorf("nats: message %s in %s: lease expired at %s: %w", m.ID, q.name, l.until.Format(time.RFC3339Nano), queue.ErrLeaseLost)
	}
	if remove {
		delete(q.leases, m.ID)
	}
	return l, nil
}

// restore puts back a lease whose settlement failed before the server answered.
func (q *Queue) restore(id string, l *lease) {
	q.mu.Lock()
	if _, ok := q.leases[id]; !ok {
		q.leases[id] = l
	}
	q.mu.Unlock()
}

// Delete acks a leased message and waits for the server's confirmation (double ack),
// retrying an unconfirmed ack while the lease lasts (ackLease).
func (q *Queue) Delete(ctx context.Context, m *queue.Message) error {
	l, err := q.leaseOf(m, true)
	if err != nil {
		return err
	}
	if err := q.ackLease(ctx, l, ackAck); err != nil {
		q.restore(m.ID, l)
		return fmt.Errorf("nats: ack %s in %s: %w", m.ID, q.name, err)
	}
	q.forgetReleases(ctx, l)
	return nil
}

// UpdateVisibility gives a leased message back: at once (Nak) for d <= 0, after d
// (NakWithDelay) otherwise — this process keeps the lease until then, so a renewal is an
// update too.
func (q *Queue) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	if d <= 0 {
		l, err := q.leaseOf(m, true)
		if err != nil {
			return err
		}
		if err := q.ackSync(ctx, l.reply, ackNak); err != nil {
			q.restore(m.ID, l)
			return fmt.Errorf("nats: nak %s in %s: %w", m.ID, q.name, err)
		}
		m.LeaseToken, m.VisibleAt = "", time.Now()
		q.noteWrite()
		return nil
	}
	return q.extend(ctx, m, d, false)
}

// Renew extends m's lease by d: InProgress when d is the consumer's AckWait, NakWithDelay(d)
// otherwise.
func (q *Queue) Renew(ctx context.Context, m *queue.Message, d time.Duration) error {
	return q.extend(ctx, m, d, d == q.b.opts.AckWait)
}

func (q *Queue) extend(ctx context.Context, m *queue.Message, d time.Duration, progress bool) error {
	l, err := q.leaseOf(m, false)
	if err != nil {
		return err
	}
	now := time.Now()
	if progress {
		err = q.ackSync(ctx, l.reply, ackProgress)
	} else {
		err = q.ackSync(ctx, l.reply, nakDelay(d))
	}
	if err != nil {
		return fmt.Errorf("nats: extend lease of %s in %s: %w", m.ID, q.name, err)
	}
	token := strings.SplitN(l.token, ".", 2)[0] + "." + strconv.FormatUint(q.gen.Add(1), 36)
	until := now.Add(d)
	q.mu.Lock()
	l.token, l.until = token, until
	q.mu.Unlock()
	m.LeaseToken, m.VisibleAt = token, until
	if !progress {
		q.noteDue(until)
	}
	return nil
}

// Send publishes a message to the queue's subject and returns its stream sequence. The
// attributes become headers; a Delay or TTL becomes a header of the backend's own.
func (q *Queue) Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error) {
	msg, err := q.newMsg(body, opts.Attributes)
	if err != nil {
		return "", err
	}
	now := time.Now()
	if opts.Delay > 0 {
		msg.Header.Set(hdrNotBefore, strconv.FormatInt(now.Add(opts.Delay).UnixNano(), 10))
	}
	if opts.TTL > 0 {
		msg.Header.Set(hdrExpires, strconv.FormatInt(now.Add(opts.TTL).UnixNano(), 10))
	}
	if opts.DedupID != "" {
		msg.Header.Set(hdrMsgID, opts.DedupID)
	}
	ack, err := q.b.js.PublishMsg(ctx, msg)
	if err != nil {
		return "", fmt.Errorf("nats: send to %s (subject %s): %w", q.name, q.subject, err)
	}
	if opts.Delay > 0 {
		q.noteDue(now.Add(opts.Delay))
		q.mu.Lock()
		q.wake.Fire()
		q.mu.Unlock()
	} else {
		q.noteWrite()
	}
	return strconv.FormatUint(ack.Sequence, 10), nil
}

// newMsg builds a message for the queue's subject, the attributes as headers.
func (q *Queue) newMsg(body []byte, attrs map[string]string) (*natsgo.Msg, error) {
	if len(body) > q.MaxMessageBytes() {
		return nil, fmt.Errorf("nats: send to %s: body of %d bytes is above the limit of %d (max_payload less %d for headers)", q.name, len(body), q.MaxMessageBytes(), headerRoom)
	}
	msg := natsgo.NewMsg(q.subject)
	if k, ok := attrs[queue.AttrOrderKey]; ok && q.ordered {
		msg.Subject = q.groupSubject(orderGroup(k))
	}
	msg.Data = body
	var enc []string
	for k, v := range attrs {
		if k == "" || reserved(k) || strings.ContainsAny(k, ":, \t\r\n") {
			return nil, fmt.Errorf("nats: send to %s: attribute %q cannot be a header name (empty, reserved Nats-/Wqhost- prefix, or a colon, comma, space or line break)", q.name, k)
		}
		if !literal(v) {
			enc = append(enc, k)
			v = base64.StdEncoding.EncodeToString([]byte(v))
		}
		msg.Header.Set(k, v)
	}
	if len(enc) > 0 {
		slices.Sort(enc)
		msg.Header.Set(hdrEncoded, strings.Join(enc, ","))
	}
	return msg, nil
}

// MoveTo dead-letters (or requeues) a leased message into another queue of this backend:
// it publishes body with opts to dst, deduplicated by the source message (Nats-Msg-Id), so a
// copy redelivered after a lost Term is not moved twice within the stream's duplicate window,
// then terminates the source, confirmed by the server. It fails with ErrLeaseLost, sending nothing, when
// the lease is no longer held, and with errors.ErrUnsupported when dst is not of this backend.
func (q *Queue) MoveTo(ctx context.Context, m *queue.Message, dst queue.Queue, body []byte, opts queue.SendOptions) error {
	d, ok := dst.(*Queue)
	if !ok || d.b != q.b || opts.Delay > 0 || opts.TTL > 0 {
		return errors.ErrUnsupported
	}
	l, err := q.leaseOf(m, false)
	if err != nil {
		return err
	}
	if body == nil && m.Oversize > 0 {
		q.mu.Lock()
		body = l.body
		q.mu.Unlock()
	}
	msg, err := d.newMsg(body, opts.Attributes)
	if err != nil {
		return err
	}
	msg.Header.Set(hdrMsgID, q.streamName+":"+m.ID)
	if _, err := q.b.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("nats: move %s from %s to %s: %w", m.ID, q.name, d.name, err)
	}
	d.noteWrite()
	q.mu.Lock()
	delete(q.leases, m.ID)
	q.mu.Unlock()
	reason := opts.Attributes[queue.AttrReason]
	if len(reason) > 200 {
		reason = reason[:200]
	}
	if err := q.ackLease(ctx, l, term(strings.ReplaceAll(reason, "\n", " "))); err != nil {
		return fmt.Errorf("nats: terminate %s in %s after moving it to %s: %w", m.ID, q.name, d.name, err)
	}
	q.forgetReleases(ctx, l)
	return nil
}

// Depth is the stream's message count when the queue owns a work-queue stream (exact: what is
// not acked); otherwise the consumer's messages not yet delivered plus those delivered and
// not acked (leased, or waiting for a delayed retry), which the consumer counts a moment
// after a publish.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	if q.ordered && !q.ownStream {
		pending, acked, err := q.pendingSums(ctx)
		return int64(pending + acked), err
	}
	if q.ownStream {
		si, err := q.stream.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("nats: depth of %s: %w", q.name, err)
		}
		return int64(si.State.Msgs), nil
	}
	ci, err := q.cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("nats: depth of %s: %w", q.name, err)
	}
	return int64(ci.NumPending) + int64(ci.NumAckPending), nil
}
