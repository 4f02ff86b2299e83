package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/internal/backends"
	"github.com/wqhost/wqhost/host/internal/breaker"
	"github.com/wqhost/wqhost/host/internal/fair"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/listener/sharded"
	"github.com/wqhost/wqhost/plugins/builtin"
	"github.com/wqhost/wqhost/plugins/external"
	"github.com/wqhost/wqhost/runtime"
)

// binding is one queue -> module -> output wiring of a tenant.
type binding struct {
	h      *Host
	tenant *tenant
	// budgetWhat names the binding's message bodies in a memory budget's refusal.
	budgetWhat string
	name       string
	cfg        config.Binding
	log        *slog.Logger
	backend    queue.Backend
	physical   string // the input queue's backend name
	queue      queue.Queue
	dead       queue.Queue
	lis        *listener.Listener
	plugins    []namedPlugin
	// Under Host.run's lock: stop stops the listener Run started, done is closed when it
	// has returned, wait returns its error; stopped is set once a reload stops the binding,
	// so it never starts; reaped once its end was logged (runner.reap).
	stop    context.CancelFunc
	done    <-chan struct{}
	wait    func() error
	stopped bool
	reaped  bool
	latency prometheus.Observer
	gate    *breaker.Gate // circuit breaker and slots (host/internal/breaker)
	share   *fair.Binding // its part of the tenant's share of the fair scheduler; nil: none

	outMu   sync.Mutex
	outputs map[string]queue.Queue // by tenant-local name
	// outSends and outErrors count the output sends (billed calls) and the failed ones.
	outSends, outErrors atomic.Uint64
	// calls are the messages whose handler call runs, named if a shutdown abandons them.
	calls callSet
	// attempts are the failed attempts of messages not yet finished (attempts.go).
	attempts attemptLog
	// usage sums its handler calls' metering (meter.go).
	usage usageCounters

	reloader // the serving module version and its hot reload (reload.go)
}

type namedPlugin struct {
	policy string // backoff, scaler or poison
	p      *external.Plugin
	path   string
	digest *atomic.Value // string: the binary's sha256 when last (re)started, for the watcher
}

func (h *Host) newBinding(ctx context.Context, t *tenant, name string, bc config.Binding) (_ *binding, err error) {
	b := &binding{
		h: h, tenant: t, name: name, cfg: bc, budgetWhat: "binding " + name + ": message bodies",
		log:     h.log.With("tenant", t.name, "binding", name),
		outputs: map[string]queue.Queue{},
	}
	defer func() {
		if err != nil {
			_ = b.close(context.Background())
		}
	}()
	// A backend that cannot serve yet (a cluster without quorum) is waited for at start.
	err = h.untilServed(ctx, "tenants."+t.name+".bindings."+name, func(ctx context.Context) (err error) {
		if b.backend, err = h.backs.Get(ctx, bc.Backend); err != nil {
			return err
		}
		if b.queue, err = b.openInput(ctx); err != nil {
			return err
		}
		if b.dead, err = b.backend.Open(ctx, h.cfg.PhysicalQueue(t.name, bc.Backend, bc.Queue+config.PoisonSuffix)); err != nil {
			return fmt.Errorf("open poison queue: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.physical = b.queue.Name()

	wasm, err := source.Module(h.cfg, bc.Module)
	if err != nil {
		return nil, fmt.Errorf("module: %w", err)
	}
	v, err := b.buildVersion(ctx, wasm)
	if err != nil {
		return nil, err
	}
	b.cur.Store(v)
	b.hist.started(v.module, v.loadedAt)
	b.latency = h.metrics.latencyFor(t.name, name, bc.Queue)

	backoff, scaler, poison, err := b.policies(ctx)
	if err != nil {
		return nil, err
	}
	lc := listener.Config{
		Queue: b.queue, DeadLetter: b.dead, Handler: b,
		Backoff: backoff, Scaler: scaler, Poison: poison,
		MinWorkers: bc.MinWorkers, MaxWorkers: bc.MaxWorkers, BatchSize: bc.BatchSize,
		Batch:       listener.BatchConfig{MaxMessages: bc.Batch.MaxMessages, MaxWait: bc.Batch.MaxWait, MaxBytes: int64(bc.Batch.MaxBytes)},
		Concurrency: min(bc.BatchSize, bc.Pool.MaxInstances),
		// The pool runs max_instances calls at once whatever the worker count: lease no
		// more than those plus a prefetch of as many (listener.Config.Prefetch).
		HandlerSlots:      bc.Pool.MaxInstances,
		VisibilityTimeout: bc.VisibilityTimeout, MaxDequeueCount: bc.MaxDequeueCount,
		MinIdle: bc.Backoff.Min, MaxIdle: bc.Backoff.Max,
		Push: bc.Push, AtMostOnce: bc.AtMostOnce, PushFallbackPoll: pushFallback(bc.PushFallbackPoll),
		ShutdownGrace:  h.cfg.Shutdown.Grace,
		HandlerVersion: func() string { return b.cur.Load().module.Digest()[:12] },
		Logger:         b.log,
	}
	// A body above the tenant's limit is dead-lettered unread (on the local store never
	// loaded): a binding holds at most (slots + prefetch) × max_message_bytes of bodies.
	lc.MaxMessageBytes = int64(t.conf().Limits.MaxMessageBytes)
	// Group N+1 is received only once group N has settled (listener/ordered.go).
	lc.Ordered = bc.Ordered
	var share listener.Limiter // nil, not a nil *fair.Binding: the gate skips it
	if t.limiter != nil {
		// The tenant's cap and weighted share of the host budget, shared by its bindings
		// (host/internal/fair).
		b.share = t.limiter.Binding(name, 1)
		share = b.share
	}
	b.gate = breaker.NewGateWith(breakerOptions(t.conf().Limits.Timeout, bc.Breaker), h.suspect, share)
	lc.Limiter = b.gate // its circuit breaker (host/internal/breaker)
	if t.quota != nil {
		lc.Limiter = quotaGate{Gate: b.gate, q: t.quota} // and its tenant's fuel quota (quota.go)
	}
	if lc.IdlePacer, err = h.idle.pacer(h.cfg, bc); err != nil {
		return nil, err
	}
	if b.lis, err = listener.New(lc); err != nil {
		return nil, err
	}
	b.log.Info("binding loaded", "queue", b.physical, "output", bc.Output, "module", bc.Module,
		"abi", bc.ABI, "digest", v.module.Digest()[:12])
	return b, nil
}

func (b *binding) openInput(ctx context.Context) (queue.Queue, error) {
	cfg, tn := b.h.cfg, b.tenant.name
	if len(b.cfg.Shards) == 0 {
		q, err := b.backend.Open(ctx, cfg.PhysicalQueue(tn, b.cfg.Backend, b.cfg.Queue))
		if err != nil {
			return nil, fmt.Errorf("open queue %s: %w", b.cfg.Queue, err)
		}
		return q, nil
	}
	shards := make([]queue.Queue, 0, len(b.cfg.Shards))
	for _, s := range b.cfg.Shards {
		q, err := b.backend.Open(ctx, cfg.PhysicalQueue(tn, b.cfg.Backend, s))
		if err != nil {
			return nil, fmt.Errorf("open shard %s: %w", s, err)
		}
		shards = append(shards, q)
	}
	return sharded.New(cfg.PhysicalQueue(tn, b.cfg.Backend, b.cfg.Queue), shards, sharded.Options{})
}

// reads reports whether the binding consumes the tenant-local queue q.
func (b *binding) reads(q string) bool {
	return b.cfg.Queue == q || slices.Contains(b.cfg.Shards, q)
}

// policies builds the built-in policies and, where the config names a plugin, starts it
// with the built-in as its fallback.
func (b *binding) policies(ctx context.Context) (listener.Backoff, listener.Scaler, listener.PoisonPolicy, error) {
	bc := b.cfg
	backoff, err := builtin.NewBackoffNamed(bc.Backoff.Policy, builtin.BackoffOptions{MinIdle: bc.Backoff.Min, MaxIdle: bc.Backoff.Max})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("backoff: %w", err)
	}
	rows := make([]builtin.DepthRow, len(bc.Scaler.Table))
	for i, r := range bc.Scaler.Table {
		rows[i] = builtin.DepthRow{Depth: r.Depth, Workers: r.Workers}
	}
	if len(rows) == 0 {
		rows = nil
	}
	scaler, err := builtin.NewScalerNamed(bc.Scaler.Policy, builtin.ScalerOptions{Table: rows, TargetPerWorker: bc.Scaler.Target})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("scaler: %w", err)
	}
	poison, err := builtin.NewPoisonNamed(bc.Poison.Policy, builtin.PoisonOptions{BaseDelay: bc.Poison.BaseDelay, MaxDelay: bc.Poison.MaxDelay, Jitter: poisonJitter(bc.Poison.Jitter)})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("poison: %w", err)
	}
	limits := external.Limits{MinWorkers: bc.MinWorkers, MaxWorkers: bc.MaxWorkers, MinDelay: bc.Backoff.Min, MaxDelay: bc.Backoff.Max}
	start := func(kind string, ref config.PluginRef, fallback any) (*external.Plugin, error) {
		if ref.Plugin == "" {
			return nil, nil
		}
		env := make([]string, 0, len(ref.Env))
		for _, k := range slices.Sorted(maps.Keys(ref.Env)) {
			env = append(env, k+"="+ref.Env[k])
		}
		path := b.h.cfg.PluginPath(ref.Plugin)
		digest := &atomic.Value{}
		digest.Store(fileDigest(path))
		p, err := external.Start(ctx, external.Config{
			Path: path, Args: ref.Args, Env: env, CallTimeout: ref.Timeout,
			Limits: limits, Logger: b.log.With("policy", kind),
		}, fallback)
		if err != nil {
			return nil, fmt.Errorf("%s.plugin: %w", kind, err)
		}
		b.plugins = append(b.plugins, namedPlugin{policy: kind, p: p, path: path, digest: digest})
		return p, nil
	}
	if p, err := start("backoff", bc.Backoff.PluginRef, backoff); err != nil {
		return nil, nil, nil, err
	} else if p != nil {
		backoff = p.Backoff()
	}
	if p, err := start("scaler", bc.Scaler.PluginRef, scaler); err != nil {
		return nil, nil, nil, err
	} else if p != nil {
		scaler = p.Scaler()
	}
	if p, err := start("poison", bc.Poison.PluginRef, poison); err != nil {
		return nil, nil, nil, err
	} else if p != nil {
		poison = p.Poison()
	}
	// The console shows the scaler's recent answers (history.go).
	return backoff, recordingScaler{inner: scaler, hist: &b.hist}, poison, nil
}

// Handle implements listener.Handler: one message through the module, its result as the
// message's outcome.
func (b *binding) Handle(ctx context.Context, m *queue.Message) outcome.Outcome {
	in := b.input(m)
	// The body the call runs on is held from the tenant's memory budget until the call has
	// settled: a tenant past its budget retries its messages later rather than take the
	// host's memory (runtime/budget.go).
	rt, held := b.tenant.rt, int64(len(m.Body))
	if err := rt.ReserveMemory(runtime.ConsumerMessages, held, b.budgetWhat); err != nil {
		return b.settleOutputs(ctx, m, OutcomeOf(&runtime.Result{Err: err}), nil, nil, runtime.Usage{}, 1)
	}
	defer rt.ReleaseMemory(runtime.ConsumerMessages, held)
	out := b.call(ctx, &in)
	defer out.Release()
	// The call as the caller saw it: waiting for an instance, then the guest.
	took := out.Usage.Wait + out.Usage.Wall
	b.latency.Observe(took.Seconds())
	o := OutcomeOf(out)
	b.gate.RecordCall(o.Cause, took, forcedStart(out.Usage))
	b.meter(out.Usage)
	return b.settleOutputs(ctx, m, o, out.Outputs, nil, out.Usage, 1)
}

// HandleBatch implements listener.BatchHandler: the messages through the module's
// wqhost_handle_batch in one call, each message settled by its own result.
func (b *binding) HandleBatch(ctx context.Context, ms []*queue.Message, outs []outcome.Outcome) {
	ins := make([]*runtime.Input, len(ms))
	var held int64
	for i, m := range ms {
		in := b.input(m)
		ins[i] = &in
		held += int64(len(m.Body))
	}
	rt := b.tenant.rt
	if err := rt.ReserveMemory(runtime.ConsumerMessages, held, b.budgetWhat); err != nil {
		for k, m := range ms {
			outs[k] = b.settleOutputs(ctx, m, OutcomeOf(&runtime.Result{Err: err}), nil, nil, runtime.Usage{}, len(ms))
		}
		return
	}
	defer rt.ReleaseMemory(runtime.ConsumerMessages, held)
	v := b.acquire()
	defer v.release()
	b.calls.add(ins)
	out, err := v.pool.CallBatch(ctx, ins)
	defer out.Release()
	took := out.Usage.Wait + out.Usage.Wall
	b.calls.remove(ins)
	b.latency.Observe(took.Seconds())
	b.gate.RecordCall(causeOf(err), took, forcedStart(out.Usage))
	b.meter(out.Usage)
	// The call's own outputs (emit without a message) go first: if they cannot be sent,
	// every message that ended ok fails with them, so none is deleted without its output.
	var sendErr error
	if len(out.Outputs) > 0 {
		sendErr = b.sendOutputs(ctx, out.Outputs, nil) // of no one message: nothing to name them after
	}
	for k := range out.Messages {
		r := &out.Messages[k]
		outs[k] = b.settleOutputs(ctx, ms[k], OutcomeOf(r), r.Outputs, sendErr, out.Usage, len(ms))
	}
}

// forcedStart is the instance start a call had to make, for the breaker
// (breaker.Gate.RecordCall): its wall time when its start function ran guest code. An
// instance without one starts in microseconds, and its restarts after cheap traps stay
// cheap; a module without a fuel counter reports no start fuel, so its starts are not
// weighed.
func forcedStart(u runtime.Usage) time.Duration {
	if u.StartFuel == 0 {
		return 0
	}
	return u.StartWall
}

// input is m as the module's input. Its size was checked by the listener
// (listener.Config.MaxMessageBytes, the tenant's max_message_bytes): no larger body gets here.
func (b *binding) input(m *queue.Message) runtime.Input {
	return runtime.Input{
		ID: m.ID, Queue: b.cfg.Queue, Body: m.Body, DequeueCount: int64(m.DequeueCount),
		InsertedAt: m.InsertedAt, OrderKey: m.Attributes[queue.AttrOrderKey],
	}
}

// settleOutputs completes a message's outcome o: a done message is done once its outputs are
// sent (a failure if they cannot be); any other is logged. sendErr, when not nil, is a
// failure to send outputs the message's success depends on (a batch call's own). An outcome
// other than done carries the attempt's usage u, of a call of n messages, as the attributes
// of the dead letter it may become.
func (b *binding) settleOutputs(ctx context.Context, m *queue.Message, o outcome.Outcome, outputs []runtime.Emitted, sendErr error, u runtime.Usage, n int) outcome.Outcome {
	if o.Kind == outcome.KindDone {
		err := sendErr
		if err == nil {
			err = b.sendOutputs(ctx, outputs, m)
		}
		if err == nil {
			b.attempts.done(m.ID)
			return o
		}
		o = outcome.FailedBy(outcome.CauseOutputRefused, err)
	}
	o.Attrs = usageAttrs(u, n)
	wall := u.Wall / time.Duration(max(n, 1))
	o.Attrs[queue.AttrAttempts] = b.attempts.failed(m.ID, attemptOf(time.Now().Add(-wall), wall, u.Fuel/uint64(max(n, 1)), o))
	b.logFailure(m, o)
	return o
}

// call runs in on the serving version, counted on that version until Pool.CallInto returns
// or panics: retire waits for the count to reach zero before closing the version's pool, so
// a count a panic left behind would hold the old version for ever and stall every later
// reload. The result's Usage is set even when the call failed (its Err).
func (b *binding) call(ctx context.Context, in *runtime.Input) *runtime.Result {
	v := b.acquire()
	defer v.release()
	b.calls.addID(in.ID)
	defer b.calls.removeID(in.ID)
	out := new(runtime.Result)
	_ = v.pool.CallInto(ctx, in, out) // out.Err
	return out
}

// logFailure logs a failed or rejected message at debug level only: the listener logs one
// WARN line per failure once its poison policy has decided what happens to the message
// (listener/fail.go: retried with the delay applied, dead-lettered or dropped, each with the
// reason), so a poisoned message is one line, not two.
func (b *binding) logFailure(m *queue.Message, o outcome.Outcome) {
	if o.Kind == outcome.KindRetry {
		return
	}
	b.log.Debug("message failed", "id", m.ID, "queue", b.physical, "dequeue_count", m.DequeueCount, "cause", o.Cause, "reason", o.Reason())
}

// sendOutputs sends every output before the message is settled, so a crash between the two
// repeats outputs (at least once) but never loses them. The outputs of message from (nil
// for a batch call's own) are named after it (SendOptions.DedupID): its queue, id and
// insertion time, which a redelivery keeps and a new message with a reused id (a local
// store made anew) does not, and the output's place. So a backend that drops repeats (nats)
// sends them once however often the message is handled within its window.
func (b *binding) sendOutputs(ctx context.Context, outs []runtime.Emitted, from *queue.Message) error {
	var key []byte // the message's part of its outputs' ids, written once for all of them
	if from != nil && len(outs) > 0 {
		key = append(append(append([]byte("wqhost:"), b.physical...), ':'), from.ID...)
		key = append(strconv.AppendInt(append(key, ':'), from.InsertedAt.UnixNano(), 10), ':')
	}
	for i, o := range outs {
		q, err := b.outputQueue(ctx, o.Queue)
		if err != nil {
			return err
		}
		var opts queue.SendOptions
		if key != nil {
			opts.DedupID = string(strconv.AppendInt(key, int64(i), 10))
		}
		b.outSends.Add(1)
		if _, err := q.Send(ctx, o.Body, opts); err != nil {
			b.outErrors.Add(1)
			return fmt.Errorf("sending output to queue %s: %w", o.Queue, err)
		}
	}
	return nil
}

func (b *binding) outputQueue(ctx context.Context, name string) (queue.Queue, error) {
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if q, ok := b.outputs[name]; ok {
		return q, nil
	}
	if err := backends.CheckOwnQueue(b.h.cfg, b.tenant.name, b.cfg.Backend, name); err != nil {
		return nil, err
	}
	q, err := b.backend.Open(ctx, b.h.cfg.PhysicalQueue(b.tenant.name, b.cfg.Backend, name))
	if err != nil {
		return nil, fmt.Errorf("opening output queue %s: %w", name, err)
	}
	b.outputs[name] = q
	return q, nil
}

func (b *binding) close(ctx context.Context) error {
	var errs []error
	for _, np := range b.plugins {
		errs = append(errs, np.p.Close())
	}
	errs = append(errs, b.closeVersions(ctx))
	if b.share != nil {
		b.share.Drop()
	}
	return errors.Join(errs...)
}

// poisonJitter maps the config's poison.jitter (0 = none) to the policy's (0 = its default,
// negative = none).
func poisonJitter(j float64) float64 {
	if j == 0 {
		return -1
	}
	return j
}

// pushFallback maps the config's push_fallback_poll (0 = off) to the listener's (negative =
// off, 0 = its default).
func pushFallback(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
