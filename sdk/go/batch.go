package wqhost

import (
	"iter"
	"strconv"
	"time"
)

// BatchHandlerFunc handles a batch of messages. Its Result is the verdict of every message
// that has none of its own (see BatchMessage.OK, Retry and Reject).
type BatchHandlerFunc func(b *Batch) Result

// HandleBatch registers a batch handler. Call it from init.
//
// On a binding with batch: the host calls wqhost_handle_batch with the messages its listener
// gathered; on a binding without, wqhost_handle with one message, and the SDK runs this
// handler with a batch of one (the batch functions work in both, docs/abi.md), so the same
// module serves either. If Handle is registered too, each export runs its own kind of
// handler: wqhost_handle the message handler, wqhost_handle_batch the batch handler.
//
// How each message ends: by its own verdict if the handler gave it one, else by the
// returned Result. Outputs of BatchMessage.Emit belong to their message and are sent only if
// it ends OK; outputs of the package's Emit belong to the call and are sent only if the
// handler returns OK, whatever the messages' own verdicts. So a handler writing one output
// for the whole batch uses Emit, rejects the messages it left out, and returns OK.
func HandleBatch(h BatchHandlerFunc) { g.batchHandler = h }

// Batch is the batch of messages being handled. It and its messages are valid only during
// the handler call: the SDK reuses them for the next batch.
type Batch struct {
	msgs []BatchMessage
	// arena holds the bodies read during this call, back to back, so they all stay valid
	// until the call ends while one buffer is reused across calls.
	arena []byte
}

// Len returns the number of messages in the batch (1 to the binding's batch.max_messages;
// 1 on a binding without batch:).
func (b *Batch) Len() int { return len(b.msgs) }

// Message returns message i, 0 <= i < Len(), in the order the messages were received. It
// panics if i is out of range, as indexing a slice does.
func (b *Batch) Message(i int) *BatchMessage { return &b.msgs[i] }

// Messages iterates over the batch's messages in order:
//
//	for m := range b.Messages() { ... }
func (b *Batch) Messages() iter.Seq[*BatchMessage] {
	return func(yield func(*BatchMessage) bool) {
		for i := range b.msgs {
			if !yield(&b.msgs[i]) {
				return
			}
		}
	}
}

// reset makes the batch n messages long for a new call, keeping its buffers.
func (b *Batch) reset(n int) {
	if n < 0 {
		n = 0
	}
	if cap(b.msgs) < n {
		b.msgs = make([]BatchMessage, n)
	}
	b.msgs = b.msgs[:n]
	for i := range b.msgs {
		b.msgs[i] = BatchMessage{batch: b, index: int32(i)}
	}
	b.arena = b.arena[:0]
}

// readBody reads message i's body into the arena and returns it, with its capacity cut at
// its length so that appending to it cannot overwrite the next body.
func (b *Batch) readBody(i int32) []byte {
	n := hostBatchBodyLen(i)
	if n <= 0 {
		return nil
	}
	if cap(b.arena)-len(b.arena) < int(n) {
		// A new, larger arena; the bodies already handed out keep the old one alive until
		// the call ends, and the next call starts with the larger one.
		b.arena = make([]byte, 0, max(2*cap(b.arena), int(n)))
	}
	start := len(b.arena)
	dst := b.arena[start : start+int(n)]
	copied := hostBatchBody(i, dst)
	if copied < 0 {
		copied = 0
	}
	b.arena = b.arena[:start+int(copied)]
	return dst[:copied:copied]
}

// BatchMessage is one message of a batch: it reads the message, ties outputs to it and sets
// its verdict.
type BatchMessage struct {
	batch  *Batch
	index  int32
	body   []byte
	loaded bool
}

// Index returns the message's position in the batch.
func (m *BatchMessage) Index() int { return int(m.index) }

// Body returns the message body. The slice is owned by the SDK: it stays valid, like every
// other message's body, until the batch handler returns, and its memory is reused for the
// next batch; copy it to keep it longer.
func (m *BatchMessage) Body() []byte {
	if !m.loaded {
		m.body = m.batch.readBody(m.index)
		m.loaded = true
	}
	return m.body
}

// ID returns the message id.
func (m *BatchMessage) ID() string { return m.meta("id") }

// Queue returns the queue the message came from.
func (m *BatchMessage) Queue() string { return m.meta("queue") }

// OrderKey returns the ordered-execution group, or "" when the message has none.
func (m *BatchMessage) OrderKey() string { return m.meta("order_key") }

// DequeueCount returns how many times the message was delivered (1 on the first delivery),
// or 0 when the host did not say.
func (m *BatchMessage) DequeueCount() int { return dequeueCount(m.meta("dequeue_count")) }

// InsertedAt returns when the message was queued, or the zero time when the host did not say.
func (m *BatchMessage) InsertedAt() time.Time { return insertedAt(m.meta("inserted_at")) }

// Meta returns a metadata value by its ABI key, and whether the host has it.
func (m *BatchMessage) Meta(key string) (string, bool) { return metaLookup(true, m.index, key) }

func (m *BatchMessage) meta(key string) string {
	v, _ := metaLookup(true, m.index, key)
	return v
}

// Emit queues an output message tied to this message, to queue ("" means the binding's
// output queue): it is sent only if this message ends OK. After the message has a verdict
// the host takes no more outputs for it, and Emit returns an error that unwraps to ErrDenied.
func (m *BatchMessage) Emit(queue string, body []byte) error {
	if err := codeError(hostBatchEmit(m.index, queue, body)); err != nil {
		return &EmitError{Queue: queue, Err: err}
	}
	return nil
}

// OK sets the message's verdict to done: its outputs are sent and it is deleted, whatever the
// batch handler returns. The first verdict is final: a second returns a *VerdictError that
// unwraps to ErrDenied.
func (m *BatchMessage) OK() error { return m.verdict(OK()) }

// Retry sets the message's verdict to retry after the given delay (0 means the binding's
// retry policy decides); err, if not nil, is recorded as the reason. Its outputs are dropped.
func (m *BatchMessage) Retry(after time.Duration, err error) error {
	return m.verdict(Retry(after, err))
}

// Reject sets the message's verdict to go to the poison queue, with err as the reason. Its
// outputs are dropped.
func (m *BatchMessage) Reject(err error) error { return m.verdict(Reject(err)) }

func (m *BatchMessage) verdict(r Result) error { return setVerdict(m.index, r) }

// setVerdict gives batch message i the result r as its verdict.
func setVerdict(i int32, r Result) error {
	code := hostBatchVerdict(i, int32(r.status), r.retryMillis(), r.reason())
	if err := codeError(code); err != nil {
		return &VerdictError{Index: int(i), Err: err, code: code}
	}
	return nil
}

// VerdictError is the error BatchMessage.OK, Retry and Reject return when the host refuses
// the verdict; it unwraps to ErrDenied (the message has a verdict already) or ErrInvalid.
type VerdictError struct {
	// Index is the message's position in the batch.
	Index int
	// Err is the host's error code as an error.
	Err error
	// code is the host's return code. The text is chosen by it rather than by comparing Err
	// with ErrDenied: comparing interfaces pulls TinyGo's reflection into every module.
	code int32
}

func (e *VerdictError) Error() string {
	s := "wqhost: verdict for batch message " + strconv.Itoa(e.Index) + ": "
	switch e.code {
	case -2:
		return s + "the message has a verdict already"
	case -5:
		return s + "no such message in the batch, or an unknown status"
	}
	return s + e.Err.Error()
}

// Unwrap returns the host's error, for errors.Is(err, ErrDenied).
func (e *VerdictError) Unwrap() error { return e.Err }

// handleBatch serves wqhost_handle_batch: it runs the batch handler on the call's batch or,
// when only a message handler is registered, the message handler once per message.
//
//lint:ignore U1000 called by the wqhost_handle_batch export in host_wasip1.go (GOOS=wasip1 only).
func (s *guest) handleBatch() int32 {
	switch {
	case s.batchHandler != nil:
		return s.runBatch()
	case s.handler != nil:
		return s.eachMessage()
	default:
		hostSetError(noHandler)
		return int32(StatusReject)
	}
}

// runBatch runs the batch handler on the call's batch and returns the status of the messages
// it gave no verdict.
func (s *guest) runBatch() int32 {
	s.batch.reset(int(hostBatchSize()))
	return finish(s.batchHandler(&s.batch), hostSetError, hostRetryAfter)
}

// eachMessage runs the message handler on every message of the call's batch in turn, as if
// each had its own wqhost_handle call: the handler's Result becomes the message's verdict,
// and Emit inside it is tied to the message. So a module written with Handle works on a
// binding with batch:.
func (s *guest) eachMessage() int32 {
	n := hostBatchSize()
	var failed error
	for i := int32(0); i < n; i++ {
		s.msg = Message{body: s.msg.body, inBatch: true, index: i}
		r := s.handler(&s.msg)
		if err := setVerdict(i, r); err != nil && failed == nil {
			failed = err
		}
	}
	s.msg = Message{body: s.msg.body}
	if failed != nil {
		// Only a host that breaks the ABI refuses these verdicts (each message gets one, in
		// range, with a known status). The messages left without one would end by the
		// returned status: retry them rather than delete what the handler may have failed.
		hostSetError(failed.Error())
		return int32(StatusRetry)
	}
	return int32(StatusOK)
}
