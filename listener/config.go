package listener

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/wqhost/wqhost/internal/defaults"
	"github.com/wqhost/wqhost/listener/queue"
)

// Config configures a Listener. Zero values mean the documented defaults.
type Config struct {
	// Queue is the queue the listener drains. Required.
	Queue queue.Queue
	// DeadLetter receives poison messages (the <queue>-poison queue). Required.
	DeadLetter queue.Queue
	// Handler processes each message. Required.
	Handler Handler
	// Backoff paces an idle listener and decides when surplus workers stop. Required.
	Backoff Backoff
	// Scaler decides how many workers to run when work appears. Required.
	Scaler Scaler
	// Poison settles failed messages. Required.
	Poison PoisonPolicy

	// MinWorkers is the number of dequeue workers kept alive; default 1. Zero is allowed
	// (and is the default) only with Push. With Push or an IdlePacer it applies while the
	// listener has work: when the queue is found empty, a last worker stops and Run's
	// goroutine waits for the wake-up (or grant) that starts one again, so an idle listener
	// holds that one goroutine (above 1, the others park as long as one waits).
	MinWorkers int
	// MaxWorkers caps the dequeue workers; default 16.
	MaxWorkers int
	// BatchSize is the number of messages one receive asks for, 1..MaxBatch; default
	// DefaultBatchSize (MaxBatch, 32).
	BatchSize int
	// Concurrency bounds the handler calls one worker runs at once; default BatchSize.
	Concurrency int
	// HandlerSlots is how many handler calls of this listener can run at once across all
	// its workers (for a WebAssembly binding: the instance pool's size); default
	// MaxWorkers×Concurrency. With Prefetch it bounds the messages leased and not yet
	// settled (unstarted, running, or waiting for their delete): receives ask for no more
	// than HandlerSlots+Prefetch minus those, so a crash repeats at most that many.
	HandlerSlots int
	// Prefetch is how many messages may be leased beyond HandlerSlots, ready to start the
	// moment a slot frees; default min(HandlerSlots, BatchSize). It bounds the leased-idle
	// messages (State.LeasedIdle) while every slot is busy. A worker receives once at least
	// min(BatchSize, Prefetch) slots of the budget are free.
	Prefetch int
	// VisibilityTimeout is the lease taken on receive; default 30s. Leases are renewed
	// while a handler runs.
	VisibilityTimeout time.Duration
	// MaxDequeueCount is the dequeue count at which the poison policy gives up; default 5.
	MaxDequeueCount int
	// MinIdle and MaxIdle clamp the Backoff's delays; defaults 100ms and 60s.
	MinIdle, MaxIdle time.Duration
	// ErrorBackoffMax caps the exponential back-off after backend errors; default 60s.
	ErrorBackoffMax time.Duration
	// TimeSlice is how long a worker keeps its slot under a backlog before handing it back
	// to the scaling logic, so that many bindings share a host fairly; default 10s.
	TimeSlice time.Duration
	// Push says wake-ups (Notify, or a Watcher or Waiter backend) reach the listener: an
	// idle listener then makes no queue calls beyond PushFallbackPoll and its last worker
	// stops (see MinWorkers; with MinWorkers 0, when the Backoff says so).
	Push bool
	// PushFallbackPoll is, with Push, how long an idle listener goes without a receive: a
	// producer that never notifies cannot strand a message for longer. Default
	// DefaultPushFallbackPoll (5 minutes: 12 receives an hour); negative turns it off.
	PushFallbackPoll time.Duration
	// Ordered hands out the messages of one order group (queue.AttrOrderKey) together, and
	// group N+1 only once every message of group N is settled (deleted or dead-lettered; one
	// waiting for its retry holds the next group back). Queue must have ordered receive
	// (queue.OrderedReceiver: local); New fails naming it otherwise. Held messages stay in the
	// queue, taking no worker, slot or dequeue count; settlements by another process are
	// seen at the next poll, so an ordered queue is meant to be consumed by one host.
	Ordered bool
	// AtMostOnce deletes messages on receive, before they are handled.
	AtMostOnce bool
	// ShutdownGrace bounds how long in-flight handlers may run after Run's context ends;
	// default 30s.
	ShutdownGrace time.Duration
	// MaxMessageBytes, when above 0, is the largest body handed to the handler: a larger
	// one is dead-lettered with its size and this limit as the reason, and on a queue that is
	// a BodyLimiter (local) it is never loaded, so the bytes a listener holds are bounded by
	// (HandlerSlots+Prefetch) × MaxMessageBytes. With AtMostOnce the body is loaded (the
	// message is deleted on receive) and dead-lettered all the same. 0: no limit.
	MaxMessageBytes int64
	// HandlerVersion is recorded on dead letters (AttrHandlerVersion). Optional.
	HandlerVersion func() string
	// Batch hands the handler many messages in one call (it must be a BatchHandler). Off
	// by default. With it on, a worker makes one call at a time (Concurrency is 1), a
	// handler slot is one call, MaxWorkers is at most HandlerSlots+1, Prefetch defaults to
	// MaxMessages (one batch gathering while the slots are busy), and the lease budget is
	// HandlerSlots×MaxMessages+Prefetch.
	Batch BatchConfig
	// Limiter gates handler calls. Optional.
	Limiter Limiter
	// IdlePacer, when set, paces the idle receives of a listener without Push from a budget
	// shared with other listeners (listener/pollbudget): the waiting worker's next receive
	// waits for the pacer's grant, or a wake-up, instead of the Backoff's delay (the Backoff
	// still decides when surplus workers stop). Receives that find messages, and the pause
	// after a failed receive, are not paced. The last worker stops when the queue is empty
	// and the supervisor's goroutine waits for the grant, then starts one: an idle paced
	// listener keeps no worker (MinWorkers applies while it has work; above 1, the others
	// park as without a pacer). Optional; not allowed with Push, whose idle receives are PushFallbackPoll's.
	IdlePacer IdlePacer
	// Logger receives the listener's logs; default slog.Default().
	Logger *slog.Logger
}

// Defaults of Config, which the built-in policies (plugins/builtin) refer to. Those the
// host's config (host/config) also documents are defined once in internal/defaults.
const (
	DefaultMinWorkers        = defaults.MinWorkers // 1
	DefaultMaxWorkers        = defaults.MaxWorkers // 16
	DefaultBatchSize         = queue.MaxBatch
	DefaultVisibilityTimeout = defaults.VisibilityTimeout // 30s
	DefaultMaxDequeueCount   = defaults.MaxDequeueCount   // 5
	DefaultMinIdle           = defaults.MinIdle           // 100ms
	DefaultMaxIdle           = defaults.MaxIdle           // 60s
	DefaultErrorBackoffMax   = 60 * time.Second
	DefaultTimeSlice         = 10 * time.Second
	DefaultShutdownGrace     = defaults.ShutdownGrace    // 30s
	DefaultPushFallbackPoll  = defaults.PushFallbackPoll // 5m
)

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	required := []struct {
		name  string
		isNil bool
	}{
		{"queue.Queue", cfg.Queue == nil},
		{"DeadLetter", cfg.DeadLetter == nil},
		{"Handler", cfg.Handler == nil},
		{"Backoff", cfg.Backoff == nil},
		{"Scaler", cfg.Scaler == nil},
		{"Poison", cfg.Poison == nil},
	}
	for _, r := range required {
		if r.isNil {
			return cfg, fmt.Errorf("listener config: %s is required", r.name)
		}
	}
	name := cfg.Queue.Name()
	if cfg.Ordered {
		var err error
		if cfg.Queue, err = ordered(cfg.Queue); err != nil {
			return cfg, fmt.Errorf("listener config: Ordered: %w", err)
		}
	}
	bad := func(field string, format string, args ...any) (Config, error) {
		return cfg, fmt.Errorf("listener config for queue %q: %s: %s", name, field, fmt.Sprintf(format, args...))
	}
	switch {
	case cfg.MinWorkers < 0:
		return bad("MinWorkers", "%d is negative", cfg.MinWorkers)
	case cfg.MinWorkers == 0 && !cfg.Push:
		cfg.MinWorkers = DefaultMinWorkers
	}
	switch {
	case cfg.MaxWorkers < 0:
		return bad("MaxWorkers", "%d is negative", cfg.MaxWorkers)
	case cfg.MaxWorkers == 0:
		cfg.MaxWorkers = max(DefaultMaxWorkers, cfg.MinWorkers)
	}
	if cfg.MaxWorkers < cfg.MinWorkers {
		return bad("MaxWorkers", "%d is below MinWorkers %d", cfg.MaxWorkers, cfg.MinWorkers)
	}
	if cfg.MaxWorkers < 1 {
		return bad("MaxWorkers", "must be at least 1")
	}
	switch {
	case cfg.BatchSize == 0:
		cfg.BatchSize = DefaultBatchSize
	case cfg.BatchSize < 1 || cfg.BatchSize > queue.MaxBatch:
		return bad("BatchSize", "%d is outside 1..%d", cfg.BatchSize, queue.MaxBatch)
	}
	switch {
	case cfg.Concurrency == 0:
		cfg.Concurrency = cfg.BatchSize
	case cfg.Concurrency < 0:
		return bad("Concurrency", "%d is negative", cfg.Concurrency)
	}
	switch bc := cfg.Batch; {
	case bc.MaxMessages < 0 || bc.MaxMessages > MaxBatchMessages:
		return bad("Batch.MaxMessages", "%d is outside 0..%d", bc.MaxMessages, MaxBatchMessages)
	case bc.MaxWait < 0:
		return bad("Batch.MaxWait", "%s is negative", bc.MaxWait)
	case bc.MaxBytes < 0:
		return bad("Batch.MaxBytes", "%d is negative", bc.MaxBytes)
	case bc.on():
		if _, ok := cfg.Handler.(BatchHandler); !ok {
			return bad("Handler", "%T cannot take batches (Batch.MaxMessages is %d): it must implement BatchHandler", cfg.Handler, bc.MaxMessages)
		}
		cfg.Concurrency = 1
	}
	switch {
	case cfg.HandlerSlots == 0:
		cfg.HandlerSlots = cfg.MaxWorkers * max(cfg.Concurrency, 1)
	case cfg.HandlerSlots < 0:
		return bad("HandlerSlots", "%d is negative", cfg.HandlerSlots)
	}
	if cfg.Batch.on() {
		// A worker makes one call at a time: workers beyond the calls that can run, plus
		// one gathering the next batch, would only split the lease budget into small
		// batches (with 16 workers and 4 slots, batches of 100 came out at 31).
		cfg.MaxWorkers = min(cfg.MaxWorkers, cfg.HandlerSlots+1)
		cfg.MinWorkers = min(cfg.MinWorkers, cfg.MaxWorkers)
		if cfg.Prefetch == 0 {
			cfg.Prefetch = cfg.Batch.MaxMessages // the batch gathered while the slots are busy
		}
	}
	switch {
	case cfg.Prefetch == 0:
		cfg.Prefetch = min(cfg.HandlerSlots, cfg.BatchSize)
	case cfg.Prefetch < 0:
		return bad("Prefetch", "%d is negative", cfg.Prefetch)
	}
	switch {
	case cfg.MaxDequeueCount == 0:
		cfg.MaxDequeueCount = DefaultMaxDequeueCount
	case cfg.MaxDequeueCount < 0:
		return bad("MaxDequeueCount", "%d is negative", cfg.MaxDequeueCount)
	}
	durations := []struct {
		field string
		d     *time.Duration
		def   time.Duration
	}{
		{"VisibilityTimeout", &cfg.VisibilityTimeout, DefaultVisibilityTimeout},
		{"MinIdle", &cfg.MinIdle, DefaultMinIdle},
		{"MaxIdle", &cfg.MaxIdle, DefaultMaxIdle},
		{"ErrorBackoffMax", &cfg.ErrorBackoffMax, DefaultErrorBackoffMax},
		{"TimeSlice", &cfg.TimeSlice, DefaultTimeSlice},
		{"ShutdownGrace", &cfg.ShutdownGrace, DefaultShutdownGrace},
	}
	for _, d := range durations {
		switch {
		case *d.d < 0:
			return bad(d.field, "%s is negative", *d.d)
		case *d.d == 0:
			*d.d = d.def
		}
	}
	switch {
	case cfg.PushFallbackPoll == 0:
		cfg.PushFallbackPoll = DefaultPushFallbackPoll
	case cfg.PushFallbackPoll < 0:
		cfg.PushFallbackPoll = 0 // off
	}
	if cfg.IdlePacer != nil && cfg.Push {
		return bad("IdlePacer", "set with Push: a push listener's only idle receives are PushFallbackPoll's")
	}
	if cfg.MinIdle > cfg.MaxIdle {
		return bad("MinIdle", "%s exceeds MaxIdle %s", cfg.MinIdle, cfg.MaxIdle)
	}
	if cfg.VisibilityTimeout < time.Second {
		return bad("VisibilityTimeout", "%s is below 1s", cfg.VisibilityTimeout)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Logger = cfg.Logger.With("queue", name)
	return cfg, nil
}
