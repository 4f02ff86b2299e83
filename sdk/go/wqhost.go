// Package wqhost is the SDK a Go handler imports to run under wqhost's `wqhost/v1` guest ABI
// (docs/abi.md). A handler registers one function from init():
//
//	func init() {
//		wqhost.Handle(func(m *wqhost.Message) wqhost.Result {
//			if err := wqhost.Emit("", m.Body()); err != nil {
//				return wqhost.Retry(0, err)
//			}
//			return wqhost.OK()
//		})
//	}
//
//	func main() {}
//
// and is built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o handler.wasm .
//
// Registration must happen in init (or a package variable initialiser): a c-shared module runs
// package initialisation from `_initialize` but never calls main.
//
// A handler that gains from seeing many messages at once (a bulk insert, an aggregate)
// registers a batch handler with HandleBatch instead; see Batch. Either kind runs on either
// kind of binding: the SDK exports both wqhost_handle and wqhost_handle_batch and adapts.
//
// The package is source compatible with TinyGo (no reflection, no goroutines, no
// unsafe.Slice); see README.md.
package wqhost

import (
	"errors"
	"strconv"
	"time"
)

// Status is the value wqhost_handle returns to the host.
type Status int32

// The statuses of docs/abi.md.
const (
	// StatusOK means the message is done: outputs are sent and the message is deleted.
	StatusOK Status = 0
	// StatusRetry means the message is released and retried later; outputs are discarded.
	StatusRetry Status = 1
	// StatusReject means the message goes to the poison queue now; outputs are discarded.
	StatusReject Status = 2
)

// Errors returned by host functions, one per negative ABI code.
var (
	// ErrNotFound is ERR_NOT_FOUND (-1): no such metadata or config key.
	ErrNotFound = errors.New("wqhost: not found")
	// ErrDenied is ERR_DENIED (-2): the emit queue is not the tenant's own or not allowed.
	ErrDenied = errors.New("wqhost: queue denied")
	// ErrTooLarge is ERR_TOO_LARGE (-3): an output exceeds the binding's size limit.
	ErrTooLarge = errors.New("wqhost: output too large")
	// ErrLimit is ERR_LIMIT (-4): too many outputs for one message.
	ErrLimit = errors.New("wqhost: too many outputs")
	// ErrInvalid is ERR_INVALID (-5): an argument is malformed.
	ErrInvalid = errors.New("wqhost: invalid argument")
)

// codeError maps a host function's return code to nil (non-negative) or an error.
func codeError(code int32) error {
	switch {
	case code >= 0:
		return nil
	case code == -1:
		return ErrNotFound
	case code == -2:
		return ErrDenied
	case code == -3:
		return ErrTooLarge
	case code == -4:
		return ErrLimit
	case code == -5:
		return ErrInvalid
	default:
		return errors.New("wqhost: unknown host error code " + strconv.Itoa(int(code)))
	}
}

// Result is what a handler returns: build it with OK, Retry or Reject.
type Result struct {
	status Status
	after  time.Duration
	err    error
}

// OK reports the message handled: emitted outputs are sent and the message is deleted.
func OK() Result { return Result{status: StatusOK} }

// Retry releases the message to be retried after the given delay (0 means the binding's
// retry policy decides); err, if not nil, is recorded as the failure reason.
func Retry(after time.Duration, err error) Result {
	return Result{status: StatusRetry, after: after, err: err}
}

// Reject sends the message to the poison queue now, with err as the reason.
func Reject(err error) Result { return Result{status: StatusReject, err: err} }

// Status is the status the result reports to the host.
func (r Result) Status() Status { return r.status }

// Err is the failure reason, or nil.
func (r Result) Err() error { return r.err }

// After is the retry delay (0 when unset).
func (r Result) After() time.Duration { return r.after }

// finish turns a result into the status code, telling the host the reason and delay through
// the given functions (the host imports in a wasm build, fakes in tests).
func finish(r Result, setError func(string), retryAfter func(ms int64)) int32 {
	if r.err != nil {
		setError(r.err.Error())
	}
	if ms := r.retryMillis(); ms > 0 {
		retryAfter(ms)
	}
	return int32(r.status)
}

// retryMillis is the delay a retry asks for in the ABI's milliseconds: 0 for no delay (the
// binding's retry policy decides) and for results that are not retries.
func (r Result) retryMillis() int64 {
	if r.status != StatusRetry || r.after <= 0 {
		return 0
	}
	ms := int64(r.after / time.Millisecond)
	if ms == 0 {
		// A sub-millisecond delay still asks for a delay, not for the policy default.
		ms = 1
	}
	return ms
}

// reason is the failure text the result reports, "" for none.
func (r Result) reason() string {
	if r.err == nil {
		return ""
	}
	return r.err.Error()
}

// parseDequeueCount parses the dequeue_count metadata value.
func parseDequeueCount(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, errors.New("wqhost: metadata dequeue_count " + strconv.Quote(s) + " is not a count")
	}
	return n, nil
}

// parseInsertedAt parses the inserted_at metadata value (RFC 3339 with nanoseconds).
func parseInsertedAt(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &metaError{key: "inserted_at", value: s, err: err}
	}
	return t, nil
}

// metaError reports a metadata value the SDK could not parse.
type metaError struct {
	key, value string
	err        error
}

func (e *metaError) Error() string {
	return "wqhost: metadata " + e.key + " " + strconv.Quote(e.value) + ": " + e.err.Error()
}

func (e *metaError) Unwrap() error { return e.err }

// EmitError is the error Emit returns; it unwraps to one of the Err* values. It is a type
// rather than fmt.Errorf so the SDK does not pull fmt (and its reflection) into every module.
type EmitError struct {
	// Queue is the queue named in the call ("" for the binding's output queue).
	Queue string
	// Err is the host's error code as an error.
	Err error
}

func (e *EmitError) Error() string {
	return "wqhost: emit to queue " + strconv.Quote(e.Queue) + ": " + e.Err.Error()
}

// Unwrap returns the host's error, for errors.Is(err, ErrDenied) and friends.
func (e *EmitError) Unwrap() error { return e.Err }

// Level is a log level, with log/slog's values.
type Level int32

// The log levels of docs/abi.md (log/slog's values).
const (
	LevelDebug Level = -4
	LevelInfo  Level = 0
	LevelWarn  Level = 4
	LevelError Level = 8
)

// Message is the message being handled. It is valid only during the handler call: Body's
// slice is reused for the next message.
type Message struct {
	body   []byte
	loaded bool
	// inBatch says the message is message index of a wqhost_handle_batch call that a Handle
	// handler runs in (one call per message): it is read through batch_body and batch_meta,
	// and Emit ties outputs to it with batch_emit. Otherwise it is the call's message (msg_*).
	inBatch bool
	index   int32
}

// Body returns the message body. The slice is owned by the SDK and reused for the next
// message (so the hot path does not allocate); copy it to keep it.
func (m *Message) Body() []byte {
	if !m.loaded {
		if m.inBatch {
			m.body = readBatchBody(m.index, m.body[:0])
		} else {
			m.body = readBody(m.body[:0])
		}
		m.loaded = true
	}
	return m.body
}

// ID returns the message id.
func (m *Message) ID() string { return m.meta("id") }

// Queue returns the queue the message came from.
func (m *Message) Queue() string { return m.meta("queue") }

// Tenant returns the tenant name.
func (m *Message) Tenant() string { return m.meta("tenant") }

// Binding returns the binding name.
func (m *Message) Binding() string { return m.meta("binding") }

// OrderKey returns the ordered-execution group, or "" when the message has none.
func (m *Message) OrderKey() string { return m.meta("order_key") }

// DequeueCount returns how many times the message was delivered (1 on the first delivery),
// or 0 when the host did not say.
func (m *Message) DequeueCount() int { return dequeueCount(m.meta("dequeue_count")) }

// InsertedAt returns when the message was queued, or the zero time when the host did not say.
func (m *Message) InsertedAt() time.Time { return insertedAt(m.meta("inserted_at")) }

// Meta returns a metadata value by its ABI key, and whether the host has it.
func (m *Message) Meta(key string) (string, bool) { return metaLookup(m.inBatch, m.index, key) }

func (m *Message) meta(key string) string {
	v, _ := metaLookup(m.inBatch, m.index, key)
	return v
}

// metaLookup reads a metadata value of the call's message (msg_meta) or, inBatch, of batch
// message i (batch_meta).
func metaLookup(inBatch bool, i int32, key string) (string, bool) {
	var small [smallValue]byte
	if inBatch {
		get := func(key string, buf []byte) int32 { return hostBatchMeta(i, key, buf) }
		return lookup(get, key, small[:], get(key, small[:]))
	}
	return lookup(hostMeta, key, small[:], hostMeta(key, small[:]))
}

// dequeueCount is DequeueCount from the metadata value: 0 when missing or malformed.
func dequeueCount(v string) int {
	n, err := parseDequeueCount(v)
	if err != nil {
		return 0
	}
	return n
}

// insertedAt is InsertedAt from the metadata value: the zero time when missing or malformed.
func insertedAt(v string) time.Time {
	t, err := parseInsertedAt(v)
	if err != nil {
		return time.Time{}
	}
	return t
}

// Config returns the binding's config value for key, and whether it is set.
//
// The binding's config is fixed for an instance's life (docs/abi.md: a config change builds
// new instances), so the SDK asks the host once per key and instance and answers later calls
// from memory: calling Config on every message costs a short search, no host call and no
// allocation. The first maxCachedConfig keys asked for are kept; a handler asking for more
// distinct keys than that (say, one per customer) pays the host call for the rest.
func Config(key string) (string, bool) {
	for _, e := range g.config {
		if e.key == key {
			return e.value, e.found
		}
	}
	var small [smallValue]byte
	v, found := lookup(hostConfig, key, small[:], hostConfig(key, small[:]))
	if len(g.config) < maxCachedConfig {
		g.config = append(g.config, configEntry{key: key, value: v, found: found})
	}
	return v, found
}

// configEntry is one config key Config has read, found or not.
type configEntry struct {
	key, value string
	found      bool
}

// maxCachedConfig bounds the keys Config keeps: a handler reads a few settings, and a
// linear search over this many is cheaper than hashing in wasm.
const maxCachedConfig = 16

// smallValue is the stack buffer a metadata or config value is first read into: ids, URLs
// and settings fit, so a lookup is one host call and one allocation (the string).
const smallValue = 256

// lookup finishes a read whose first call, n = get(key, small), went into the caller's stack
// buffer (the host copies what fits and returns the full length); a longer value is read
// again into a buffer of its size.
func lookup(get func(key string, buf []byte) int32, key string, small []byte, n int32) (string, bool) {
	if n < 0 {
		return "", false
	}
	if int(n) <= len(small) {
		return string(small[:n]), true
	}
	buf := make([]byte, n)
	n2 := get(key, buf)
	if n2 < 0 {
		return "", false
	}
	if int(n2) < len(buf) {
		buf = buf[:n2]
	}
	return string(buf), true
}

// readBody reads the current message's body into dst, reusing its capacity.
func readBody(dst []byte) []byte {
	n := hostBodyLen()
	if n <= 0 {
		return dst[:0]
	}
	if cap(dst) < int(n) {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	copied := hostBody(dst)
	if copied < 0 {
		copied = 0
	}
	return dst[:copied]
}

// readBatchBody reads batch message i's body into dst, reusing its capacity.
func readBatchBody(i int32, dst []byte) []byte {
	n := hostBatchBodyLen(i)
	if n <= 0 {
		return dst[:0]
	}
	if cap(dst) < int(n) {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	copied := hostBatchBody(i, dst)
	if copied < 0 {
		copied = 0
	}
	return dst[:copied]
}

// Log writes a line to the host's structured log at the given level.
func Log(level Level, msg string) { hostLog(int32(level), msg) }

// Debug logs at debug level.
func Debug(msg string) { Log(LevelDebug, msg) }

// Info logs at info level.
func Info(msg string) { Log(LevelInfo, msg) }

// Warn logs at warn level.
func Warn(msg string) { Log(LevelWarn, msg) }

// Error logs at error level.
func Error(msg string) { Log(LevelError, msg) }

// Emit queues an output message to queue ("" means the binding's output queue). Outputs are
// sent only if the handler returns OK.
//
// From a Handle handler the output belongs to the message being handled, also when the
// binding batches (it is tied to that message of the batch). From a HandleBatch handler it
// belongs to the whole call: it is sent only if the batch handler returns OK, whatever the
// messages' own verdicts (use BatchMessage.Emit for an output of one message).
func Emit(queue string, body []byte) error {
	var code int32
	if g.msg.inBatch {
		code = hostBatchEmit(g.msg.index, queue, body)
	} else {
		code = hostEmit(queue, body)
	}
	if err := codeError(code); err != nil {
		return &EmitError{Queue: queue, Err: err}
	}
	return nil
}

// HandlerFunc handles one message.
type HandlerFunc func(m *Message) Result

// guest is the module's handler state. It lives in a package variable because the host calls
// exported functions with no arguments: there is nowhere else to keep it.
type guest struct {
	handler      HandlerFunc
	batchHandler BatchHandlerFunc
	selfTest     func() error
	msg          Message
	batch        Batch
	// config holds the values Config has read (see there).
	config []configEntry
}

var g guest

// Handle registers the message handler. Call it from init.
//
// On a binding with batch: the host calls wqhost_handle_batch, and the SDK runs this
// handler once per message of the batch, turning each Result into that message's verdict.
func Handle(h HandlerFunc) { g.handler = h }

// noHandler is the reason a call fails with when init registered nothing.
const noHandler = "wqhost: no handler registered (call wqhost.Handle or wqhost.HandleBatch from init)"

// SelfTest registers a check run once when a new module version is validated; a non-nil
// error rejects the version. Without one the module reports healthy.
func SelfTest(f func() error) { g.selfTest = f }

// handle serves wqhost_handle: it runs the message handler on the call's message or, when
// only a batch handler is registered, the batch handler on the call's batch of one (the
// host gives every wqhost_handle call a batch holding its message), and returns the ABI
// status.
func (s *guest) handle() int32 {
	switch {
	case s.handler != nil:
		s.msg = Message{body: s.msg.body}
		return finish(s.handler(&s.msg), hostSetError, hostRetryAfter)
	case s.batchHandler != nil:
		return s.runBatch()
	default:
		hostSetError(noHandler)
		return int32(StatusReject)
	}
}

// selfTestStatus runs the self test and returns its ABI status (0 healthy).
//
//lint:ignore U1000 called by the wqhost_self_test export in host_wasip1.go (GOOS=wasip1 only).
func (s *guest) selfTestStatus() int32 {
	if s.selfTest == nil {
		return 0
	}
	if err := s.selfTest(); err != nil {
		hostLog(int32(LevelError), "self test: "+err.Error())
		return 1
	}
	return 0
}
