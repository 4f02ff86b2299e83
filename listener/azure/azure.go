// Package azure is wqhost's Azure Queue Storage backend (azqueue), also used against the
// Azurite emulator.
//
// Leases are Azure's pop receipts: Receive leases up to 32 messages for a visibility timeout,
// Delete needs the current pop receipt, and UpdateVisibility (release, delayed retry, lease
// renewal) stores the new receipt storage returns. Azure counts time in whole seconds: a
// visibility or delay is rounded up to the next second.
//
// Encoding. Bodies are base64 (the Functions default) or raw text (Options.Encoding).
// Attributes travel in a JSON envelope (see envelope.go). A message whose text cannot be
// decoded — invalid base64 under EncodingBase64, typically written by a producer using the
// wrong encoding — is never handed to the handler, dropped or retried forever: Receive moves
// it to <queue>-poison itself, with the reason "undecodable base64: ..." and the usual
// dead-letter attributes, and counts it in Stats.Undecodable. If that move fails the message
// stays in the queue and is tried again when its lease expires.
//
// Transient faults are retried by azcore's retry policy (Options.Retry); an error that
// outlasts it matches ErrUnavailable so the listener backs off. Every storage request is
// counted per queue and operation (Backend.Stats), retries included: the transactions Azure
// bills.
package azure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/wqhost/wqhost/internal/wake"
	"github.com/wqhost/wqhost/listener/queue"
)

var (
	_ queue.Backend = (*Backend)(nil)
	_ queue.Queue   = (*Queue)(nil)
)

// maxVisibility is Azure's limit for visibility timeouts and delays: 7 days.
const maxVisibility = 7 * 24 * time.Hour

// Backend is a connection to one storage account's queue service. It is safe for
// concurrent use.
type Backend struct {
	svc     *azqueue.ServiceClient
	httpc   *http.Client
	enc     Encoding
	create  bool
	poisonT time.Duration
	pfmt    PoisonFormat
	log     *slog.Logger
	secrets []string
	closed  atomic.Bool

	mu     sync.Mutex
	queues map[string]*Queue
}

// Open validates opts and connects lazily: no request is made until a queue is used.
// Errors name the offending option and never contain secrets.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	b := &Backend{
		enc: opts.Encoding, create: opts.CreateQueues, poisonT: opts.PoisonTTL, pfmt: opts.PoisonFormat,
		log: opts.Logger, secrets: r.secrets, queues: map[string]*Queue{},
	}
	if b.enc == "" {
		b.enc = EncodingBase64
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	// One pooled transport per backend, sized for many concurrent workers: azcore's shared
	// default keeps few idle connections per host and would reconnect under load.
	b.httpc = opts.HTTPClient
	if b.httpc == nil {
		b.httpc = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			ForceAttemptHTTP2:   true,
		}}
	}
	copts := &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry:            retryOptions(opts.Retry),
		Transport:        b.httpc,
		PerRetryPolicies: []policy.Policy{countPolicy{}},
		Telemetry:        policy.TelemetryOptions{ApplicationID: "wqhost"},
	}}
	switch r.kind {
	case authSharedKey:
		cred, err := azqueue.NewSharedKeyCredential(r.account, r.key)
		if err != nil {
			return nil, fmt.Errorf("azure: shared key for account %q: %s", r.account, redactString(err.Error(), r.secrets))
		}
		b.svc, err = azqueue.NewServiceClientWithSharedKeyCredential(r.serviceURL, cred, copts)
		if err != nil {
			return nil, fmt.Errorf("azure: client for %s: %s", r.serviceURL, redactString(err.Error(), r.secrets))
		}
	case authSAS:
		b.svc, err = azqueue.NewServiceClientWithNoCredential(r.serviceURL, copts)
		if err != nil {
			return nil, fmt.Errorf("azure: client for SAS URL: %s", redactString(err.Error(), r.secrets))
		}
	case authDefault:
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("azure: Options.DefaultCredential: %w", err)
		}
		b.svc, err = azqueue.NewServiceClient(r.serviceURL, cred, copts)
		if err != nil {
			return nil, fmt.Errorf("azure: client for %s: %w", r.serviceURL, err)
		}
	}
	return b, nil
}

func retryOptions(o RetryOptions) policy.RetryOptions {
	r := policy.RetryOptions{
		MaxRetries: int32(o.MaxRetries), RetryDelay: o.RetryDelay,
		MaxRetryDelay: o.MaxRetryDelay, TryTimeout: o.TryTimeout,
	}
	if o.MaxRetries == 0 {
		r.MaxRetries = 3
	}
	if o.RetryDelay == 0 {
		r.RetryDelay = 800 * time.Millisecond
	}
	if o.MaxRetryDelay == 0 {
		r.MaxRetryDelay = 8 * time.Second
	}
	if o.TryTimeout == 0 {
		r.TryTimeout = 30 * time.Second
	}
	return r
}

// Encoding returns the backend's message encoding.
func (b *Backend) Encoding() Encoding { return b.enc }

// MaxBodySize returns the largest body Send accepts without attributes: 64 KiB of message
// text, so 48 KiB under EncodingBase64.
func (b *Backend) MaxBodySize() int { return maxBodyFor(b.enc) }

// Close releases idle connections; later operations fail with ErrClosed.
func (b *Backend) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.httpc.CloseIdleConnections()
	}
	return nil
}

// Open returns the named queue (see Queue).
func (b *Backend) Open(ctx context.Context, name string) (queue.Queue, error) {
	q, err := b.Queue(ctx, name)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return q, nil
}

// Azure's queue naming rules: 3-63 lowercase letters, digits and single hyphens, starting
// and ending with a letter or digit.
var queueNameRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*$`)

// ValidQueueName returns an error saying why name is not a valid Azure queue name.
func ValidQueueName(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("queue name %q: must be 3 to 63 characters long", name)
	}
	if !queueNameRE.MatchString(name) {
		return fmt.Errorf("queue name %q: only lowercase letters, digits and single hyphens, starting and ending with a letter or digit", name)
	}
	return nil
}

// Queue returns the named queue. With Options.CreateQueues it is created on first use;
// without, Open checks that it exists (one properties request) and fails with an error
// matching queue.ErrNotFound if not.
func (b *Backend) Queue(ctx context.Context, name string) (*Queue, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("azure: open queue %q: %w", name, ErrClosed)
	}
	if err := ValidQueueName(name); err != nil {
		return nil, fmt.Errorf("azure: open: %w", err)
	}
	b.mu.Lock()
	q, ok := b.queues[name]
	if !ok {
		q = &Queue{name: name, b: b, client: b.svc.NewQueueClient(name),
			poison: strings.HasSuffix(name, queue.PoisonSuffix)}
		b.queues[name] = q
	}
	b.mu.Unlock()
	if !ok && !b.create {
		if _, err := q.depth(ctx, false); err != nil {
			b.mu.Lock()
			delete(b.queues, name)
			b.mu.Unlock()
			return nil, err // names the queue and says what to do
		}
	}
	return q, nil
}

// Stats returns the request counters of every queue opened so far, by queue name.
func (b *Backend) Stats() map[string]Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]Stats, len(b.queues))
	for n, q := range b.queues {
		out[n] = q.Stats()
	}
	return out
}

// Stats counts one queue's storage requests. Each HTTP attempt that storage answered is a
// billed transaction, whatever its status; retries count again.
type Stats struct {
	Receive, Delete, Update, Send, Properties, Create uint64
	// Unanswered counts attempts that got no HTTP answer (refused connection, timeout).
	Unanswered uint64
	// Undecodable counts messages Receive moved to the poison queue because their text
	// could not be decoded.
	Undecodable uint64
}

// Transactions returns the number of requests storage answered (billed transactions).
func (s Stats) Transactions() uint64 {
	return s.Receive + s.Delete + s.Update + s.Send + s.Properties + s.Create
}

// Add returns the field-wise sum of s and o.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Receive: s.Receive + o.Receive, Delete: s.Delete + o.Delete, Update: s.Update + o.Update,
		Send: s.Send + o.Send, Properties: s.Properties + o.Properties, Create: s.Create + o.Create,
		Unanswered: s.Unanswered + o.Unanswered, Undecodable: s.Undecodable + o.Undecodable,
	}
}

type opKind int

const (
	opReceive opKind = iota
	opDelete
	opUpdate
	opSend
	opProperties
	opCreate
	numOps
)

// Queue is one Azure storage queue. It is safe for concurrent use.
type Queue struct {
	name   string
	b      *Backend
	client *azqueue.QueueClient
	poison bool

	counts      [numOps]atomic.Uint64
	unanswered  atomic.Uint64
	undecodable atomic.Uint64
	stall       stallWatch // stall.go

	// recov is fired by the first answered probe after a listener asked Recovered; probing
	// is set while a probe goroutine runs (recover.go).
	recov   wake.Set
	probing atomic.Bool
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Stats returns the queue's request counters.
func (q *Queue) Stats() Stats {
	return Stats{
		Receive: q.counts[opReceive].Load(), Delete: q.counts[opDelete].Load(),
		Update: q.counts[opUpdate].Load(), Send: q.counts[opSend].Load(),
		Properties: q.counts[opProperties].Load(), Create: q.counts[opCreate].Load(),
		Unanswered: q.unanswered.Load(), Undecodable: q.undecodable.Load(),
	}
}

// tag rides in the request context so countPolicy can attribute every attempt.
type tag struct {
	q  *Queue
	op opKind
	// ambiguous, when set, records that an attempt got no answer or a transient error
	// status: storage may have applied it, so a retry can see its effect.
	ambiguous *atomic.Bool
}

type tagKey struct{}

// countPolicy counts each HTTP attempt (it runs once per retry) against its queue.
type countPolicy struct{}

func (countPolicy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if t, ok := req.Raw().Context().Value(tagKey{}).(tag); ok {
		if resp != nil {
			t.q.counts[t.op].Add(1)
		} else {
			t.q.unanswered.Add(1)
		}
		if t.ambiguous != nil && (resp == nil || transientStatus(resp.StatusCode)) {
			t.ambiguous.Store(true)
		}
	}
	return resp, err
}

// call runs one storage operation, creating the queue first when it is missing and
// Options.CreateQueues is set.
func (q *Queue) call(ctx context.Context, op opKind, what, msgID string, f func(ctx context.Context) error) error {
	return q.callTracked(ctx, op, what, msgID, nil, f)
}

// callTracked is call that also reports, through ambiguous, attempts whose outcome is unknown.
func (q *Queue) callTracked(ctx context.Context, op opKind, what, msgID string, ambiguous *atomic.Bool, f func(ctx context.Context) error) (err error) {
	if q.b.closed.Load() {
		return fmt.Errorf("azure: %s %s: %w", what, q.name, ErrClosed)
	}
	done := q.watchStall(what) // stall.go: a call that hangs is logged
	defer func() { done(err) }()
	tctx := context.WithValue(ctx, tagKey{}, tag{q, op, ambiguous})
	err = f(tctx)
	if err != nil && q.b.create && queueerror.HasCode(err, queueerror.QueueNotFound) {
		if cerr := q.ensure(ctx); cerr != nil {
			return cerr
		}
		err = f(tctx)
	}
	if err != nil {
		return q.b.wrap(ctx, what, q.name, msgID, err)
	}
	return nil
}

// ensure creates the queue; an existing queue is fine (concurrent creators may race).
func (q *Queue) ensure(ctx context.Context) error {
	_, err := q.client.Create(context.WithValue(ctx, tagKey{}, tag{q: q, op: opCreate}), nil)
	if err != nil && !queueerror.HasCode(err, queueerror.QueueAlreadyExists) {
		return q.b.wrap(ctx, "create", q.name, "", err)
	}
	q.b.log.Debug("azure: created queue", "queue", q.name)
	return nil
}

// seconds converts d to Azure's whole seconds, rounding up, within [lo, 7 days].
func seconds(d time.Duration, lo int32) *int32 {
	s := int64(math.Ceil(d.Seconds()))
	s = min(max(s, int64(lo)), int64(maxVisibility/time.Second))
	v := int32(s)
	return &v
}

// Receive leases up to max (capped at 32) messages for visibility (at least 1s).
// Undecodable messages are moved to the poison queue and not returned.
func (q *Queue) Receive(ctx context.Context, max int, visibility time.Duration) ([]*queue.Message, error) {
	if max < 1 {
		return nil, fmt.Errorf("azure: receive from %s: max %d < 1", q.name, max)
	}
	n := int32(min(max, queue.MaxBatch))
	var resp azqueue.DequeueMessagesResponse
	err := q.call(ctx, opReceive, "receive from", "", func(ctx context.Context) (err error) {
		resp, err = q.client.DequeueMessages(ctx, &azqueue.DequeueMessagesOptions{
			NumberOfMessages: &n, VisibilityTimeout: seconds(visibility, 1)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]*queue.Message, 0, len(resp.Messages))
	for _, dm := range resp.Messages {
		m := &queue.Message{
			ID:           deref(dm.MessageID),
			Queue:        q.name,
			DequeueCount: int(derefInt(dm.DequeueCount)),
			LeaseToken:   deref(dm.PopReceipt),
		}
		if dm.InsertionTime != nil {
			m.InsertedAt = *dm.InsertionTime
		}
		if dm.TimeNextVisible != nil {
			m.VisibleAt = *dm.TimeNextVisible
		}
		body, attrs, derr := decode(q.b.enc, deref(dm.MessageText))
		if derr != nil && q.poison {
			// A poison queue has nowhere further to go: hand over the raw text, marked.
			body, attrs = []byte(deref(dm.MessageText)), map[string]string{queue.AttrReason: derr.Error()}
		} else if derr != nil {
			q.poisonUndecodable(ctx, m, deref(dm.MessageText), derr)
			continue
		}
		if body == nil {
			body = []byte{}
		}
		m.Body, m.Attributes = body, attrs
		uncountReleases(m)
		out = append(out, m)
	}
	return out, nil
}

// poisonUndecodable moves a message whose text cannot be decoded to <queue>-poison, text
// kept verbatim as the body, then deletes it. Failures leave it leased; it returns when the lease expires.
func (q *Queue) poisonUndecodable(ctx context.Context, m *queue.Message, text string, derr error) {
	log := q.b.log.With("queue", q.name, "message_id", m.ID)
	pq, err := q.b.Queue(ctx, q.name+queue.PoisonSuffix)
	if err == nil {
		_, err = pq.Send(ctx, []byte(text), queue.SendOptions{Attributes: map[string]string{
			queue.AttrReason:         derr.Error(),
			queue.AttrOriginalID:     m.ID,
			queue.AttrOriginalQueue:  q.name,
			queue.AttrDequeueCount:   strconv.Itoa(m.DequeueCount),
			queue.AttrDeadLetteredAt: time.Now().UTC().Format(time.RFC3339Nano),
		}})
	}
	if err == nil {
		err = q.Delete(ctx, m)
	}
	if err != nil {
		log.Error("azure: moving undecodable message to the poison queue failed; it will be retried when its lease expires", "reason", derr.Error(), "err", err)
		return
	}
	q.undecodable.Add(1)
	log.Warn("azure: undecodable message moved to the poison queue", "poison_queue", q.name+queue.PoisonSuffix, "reason", derr.Error())
}

// Delete deletes a leased message with its pop receipt; ErrLeaseLost if the receipt is stale
// or the message is gone.
//
// A delete retried after an attempt whose answer was lost (timeout, reset connection, 5xx)
// may find the message gone because that attempt did delete it. "Message not found" then
// counts as success: the message is gone either way, and reporting a lost lease would make
// the listener count a processed message as lost.
func (q *Queue) Delete(ctx context.Context, m *queue.Message) error {
	var ambiguous atomic.Bool
	err := q.callTracked(ctx, opDelete, "delete", m.ID, &ambiguous, func(ctx context.Context) error {
		_, err := q.client.DeleteMessage(ctx, m.ID, m.LeaseToken, nil)
		return err
	})
	var ae *Error
	if err != nil && ambiguous.Load() && errors.As(err, &ae) && ae.Code == string(queueerror.MessageNotFound) {
		q.b.log.Debug("azure: delete retried after an unanswered attempt found the message gone; counted as deleted", "queue", q.name, "message_id", m.ID)
		return nil
	}
	return err
}

// UpdateVisibility makes a leased message visible after d (0: now) and stores the new pop
// receipt in m. Azure's Update Message always rewrites the text, so the body and attributes
// are re-encoded and sent along; the visibility is always explicit (azqueue's default is 0).
func (q *Queue) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	text, err := encode(q.b.enc, m.Body, m.Attributes)
	if err != nil {
		return fmt.Errorf("azure: update visibility of %s message %s: %w", q.name, m.ID, err)
	}
	var resp azqueue.UpdateMessageResponse
	err = q.call(ctx, opUpdate, "update visibility of", m.ID, func(ctx context.Context) (err error) {
		resp, err = q.client.UpdateMessage(ctx, m.ID, m.LeaseToken, text,
			&azqueue.UpdateMessageOptions{VisibilityTimeout: seconds(d, 0)})
		return err
	})
	if err != nil {
		return err
	}
	if resp.PopReceipt == nil {
		return fmt.Errorf("azure: update visibility of %s message %s: no pop receipt in the answer", q.name, m.ID)
	}
	m.LeaseToken = *resp.PopReceipt
	if resp.TimeNextVisible != nil {
		m.VisibleAt = *resp.TimeNextVisible
	}
	return nil
}

// Send enqueues a message. A zero TTL means never expire, except on a <queue>-poison queue
// where Options.PoisonTTL applies; attributes travel in the envelope (on a poison queue under
// PoisonRaw, in the log).
func (q *Queue) Send(ctx context.Context, body []byte, opts queue.SendOptions) (string, error) {
	text, err := q.encodeSend(body, opts.Attributes) // poisonformat.go
	if err != nil {
		return "", fmt.Errorf("azure: send to %s: %w: %w", q.name, err, queue.ErrUnsendable)
	}
	if len(text) > maxMessageText {
		return "", fmt.Errorf("azure: send to %s: message text of %d bytes (body %d bytes, %s) exceeds Azure's %d-byte limit: %w",
			q.name, len(text), len(body), q.b.enc, maxMessageText, queue.ErrUnsendable)
	}
	ttl := opts.TTL
	if ttl <= 0 && q.poison {
		ttl = q.b.poisonT
	}
	never := int32(-1)
	eo := &azqueue.EnqueueMessageOptions{TimeToLive: &never}
	if ttl > 0 {
		eo.TimeToLive = seconds(ttl, 1)
	}
	if opts.Delay > 0 {
		eo.VisibilityTimeout = seconds(opts.Delay, 0)
	}
	var resp azqueue.EnqueueMessagesResponse
	err = q.call(ctx, opSend, "send to", "", func(ctx context.Context) (err error) {
		resp, err = q.client.EnqueueMessage(ctx, text, eo)
		return err
	})
	if err != nil {
		return "", err
	}
	if len(resp.Messages) == 0 || resp.Messages[0].MessageID == nil {
		return "", fmt.Errorf("azure: send to %s: no message id in the answer", q.name)
	}
	return *resp.Messages[0].MessageID, nil
}

// Depth returns the queue's approximate message count (leased and delayed included) from
// its properties.
func (q *Queue) Depth(ctx context.Context) (int64, error) {
	return q.depth(ctx, true)
}

// depth reads the approximate message count. With missingOK a missing queue holds nothing
// (a read for display never creates one); without, it is the error Backend.Queue reports
// when Options.CreateQueues is off.
func (q *Queue) depth(ctx context.Context, missingOK bool) (int64, error) {
	var resp azqueue.GetQueuePropertiesResponse
	missing := false
	err := q.call(ctx, opProperties, "get properties of", "", func(ctx context.Context) (err error) {
		resp, err = q.client.GetProperties(ctx, nil)
		if missingOK && queueerror.HasCode(err, queueerror.QueueNotFound) {
			missing = true // a read never creates a queue: a missing one holds nothing
			return nil
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	if missing {
		return 0, nil
	}
	if resp.ApproximateMessagesCount == nil {
		return 0, errors.New("azure: get properties of " + q.name + ": no approximate message count in the answer")
	}
	return int64(*resp.ApproximateMessagesCount), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
