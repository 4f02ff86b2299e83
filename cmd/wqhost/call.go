package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/runtime"
)

const callDoc = `
Runs one message through a module the way a binding with the default limits would (memory,
time limit, output size and count, queue-name checks, self test first), and prints the status,
for a failed call its cause as the host records it (timeout, trap, memory_limit, ...), the
outputs with their queues, the reason (set_error) and the guest's log lines. The handler
author's inner loop: build, then 'wqhost call handler.wasm --body ...'.
Message metadata the guest can read: id, queue, tenant, binding, dequeue_count, inserted_at,
order_key (set them with --meta). Exit code 0: status ok; 1: retry, reject or a failed call
(trap, time limit, memory limit); 2: bad arguments or a module that does not load (its compile
outran the budget, --compile-timeout and --compile-memory, as a tenant's limits.compile).`

// callLog collects the records the runtime logs during one call, guest lines and runtime
// events alike, to print them after the verdict.
type callLog struct {
	mu   sync.Mutex
	recs []callRecord
}

type callRecord struct {
	Level   string `json:"level"`
	Source  string `json:"source"`
	Message string `json:"message"`
}

type callLogHandler struct {
	l     *callLog
	attrs []slog.Attr
}

func (h callLogHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h callLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return callLogHandler{l: h.l, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h callLogHandler) WithGroup(string) slog.Handler { return h }
func (h callLogHandler) Handle(_ context.Context, r slog.Record) error {
	src := "runtime"
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "source" {
			src = a.Value.String()
		}
		return true
	})
	if src == "runtime" && r.Level < slog.LevelInfo {
		// The host's own bookkeeping (how long the compile child took), not the handler's.
		return nil
	}
	msg := r.Message
	if src != "guest" {
		// Runtime events carry their details as attributes (error, binding...).
		var extra []string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "source" && a.Key != "message_id" {
				extra = append(extra, a.Key+"="+a.Value.String())
			}
			return true
		})
		if len(extra) > 0 {
			msg += " " + strings.Join(extra, " ")
		}
	}
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	h.l.recs = append(h.l.recs, callRecord{Level: r.Level.String(), Source: src, Message: msg})
	return nil
}

func (c *cli) call(ctx context.Context, args []string) error {
	fl := c.flags("call", "FILE.wasm [--abi wqhost/v1|wasi-stdio|extism] [--function F] [--body B | --file F] [--meta k=v]... [--config k=v]...", callDoc)
	abi := fl.String("abi", string(runtime.ABIWqhostV1), "guest ABI: wqhost/v1, wasi-stdio or extism (a module importing extism:host/env is detected)")
	function := fl.String("function", "", "the function an Extism plugin's call runs (default "+runtime.DefaultExtismFunction+")")
	body := fl.String("body", "", "message body")
	file := fl.String("file", "", "read the message body from this file ('-' = stdin)")
	meta := fl.StringArray("meta", nil, "message metadata key=value (id, queue, dequeue_count, inserted_at, order_key, tenant, binding)")
	conf := fl.StringArray("config", nil, "binding config key=value the guest reads with config_get")
	output := fl.String("output", "out", "the binding's output queue (target of emit with an empty queue name)")
	timeout := fl.Duration("timeout", config.DefaultTimeout, "time limit of the call (a binding's default)")
	memory := fl.String("memory", "128MiB", "linear memory limit (a tenant's default)")
	asJSON := fl.Bool("json", false, "print the result as one JSON object")
	budget := compileBudgetFlags(fl)
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 1 {
		return usagef("want exactly one module file, got %d arguments (see --help)", fl.NArg())
	}
	path := fl.Arg(0)
	a := runtime.ABI(*abi)
	if a != runtime.ABIWqhostV1 && a != runtime.ABIWasiStdio && a != runtime.ABIExtism {
		return usagef("--abi %q: unknown ABI (want %s, %s or %s)", *abi, runtime.ABIWqhostV1, runtime.ABIWasiStdio, runtime.ABIExtism)
	}
	if fl.Changed("body") && *file != "" {
		return usagef("--body and --file: give one of them")
	}
	mem, err := config.ParseByteSize(*memory)
	if err != nil || mem < config.MinMemory || mem > config.MaxMemory {
		return usagef("--memory %q: want a size such as 64MiB, within %s..%s (as limits.memory)", *memory, config.MinMemory, config.MaxMemory)
	}
	if *timeout <= 0 || *timeout > config.MaxTimeout {
		// 0 or below ran the call with no time limit at all.
		return usagef("--timeout %s: want above 0 and at most %s (as limits.timeout)", *timeout, config.MaxTimeout)
	}
	compileTimeout, compileMemory, err := budget()
	if err != nil {
		return err
	}
	if *output != "" && !config.ValidQueueName(*output) {
		return usagef("--output %q: not a queue name (1-63 lower-case letters, digits or inner '-')", *output)
	}
	msg := []byte(*body)
	if *file != "" {
		if *file == "-" {
			msg, err = readAllLimited(os.Stdin, int64(config.DefaultMaxMessageBytes))
		} else {
			var f *os.File
			if f, err = os.Open(*file); err == nil {
				msg, err = readAllLimited(f, int64(config.DefaultMaxMessageBytes))
				f.Close()
			}
		}
		if err != nil {
			return usagef("--file %s: %v", *file, err)
		}
	}
	if len(msg) > int(config.DefaultMaxMessageBytes) {
		return usagef("message body of %d bytes is larger than a binding accepts (%d)", len(msg), config.DefaultMaxMessageBytes)
	}
	in := &runtime.Input{ID: "call-1", Queue: "in", Body: msg, DequeueCount: 1, InsertedAt: time.Now().UTC()}
	cfgMap := map[string]string{}
	for _, kv := range *conf {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--config %q: want key=value", kv)
		}
		cfgMap[k] = v
	}
	tenant, binding := "default", "call"
	for _, kv := range *meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return usagef("--meta %q: want key=value", kv)
		}
		switch k {
		case "id":
			in.ID = v
		case "queue":
			in.Queue = v
		case "order_key":
			in.OrderKey = v
		case "tenant":
			tenant = v
		case "binding":
			binding = v
		case "dequeue_count":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return usagef("--meta dequeue_count=%q: want a count of 1 or more", v)
			}
			in.DequeueCount = n
		case "inserted_at":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return usagef("--meta inserted_at=%q: want an RFC 3339 time", v)
			}
			in.InsertedAt = t
		default:
			return usagef("--meta %q: unknown key (the host sets id, queue, dequeue_count, inserted_at, order_key, tenant, binding)", k)
		}
	}
	wasm, err := source.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return usagef("%s: no such file", path)
		}
		return usagef("%s: %v", path, err)
	}

	logs := &callLog{}
	// Compiled in a child process under the compile budget, as a host compiles (runtime's
	// compilechild.go), into a cache of this call's own: a module within every structural
	// cap can still take minutes and gigabytes to compile.
	cache, err := os.MkdirTemp("", "wqhost-call-")
	if err != nil {
		return fmt.Errorf("compile cache: %w", err)
	}
	defer os.RemoveAll(cache)
	eng, err := runtime.NewEngine(ctx, runtime.EngineConfig{Logger: slog.New(callLogHandler{l: logs}), CacheDir: cache,
		CompileInChild: true, CompileTimeout: compileTimeout, CompileMemoryBytes: compileMemory})
	if err != nil {
		return err
	}
	defer eng.Close(context.WithoutCancel(ctx))
	m, err := eng.Compile(ctx, path, wasm, a)
	if err != nil {
		return moduleError(path, err)
	}
	t, err := eng.Tenant(tenant, runtime.TenantLimits{MemoryPages: uint32((int64(mem) + 65535) / 65536)})
	if err != nil {
		return err
	}
	pc := runtime.PoolConfig{
		Binding: binding,
		// No warm instance: the call starts its own, as a binding's first message does
		// (min_instances 0), so its usage shows what the start cost.
		MaxInstances:   1,
		Timeout:        *timeout,
		Config:         cfgMap,
		OutputQueue:    *output,
		AllowEmit:      allowQueueName,
		MaxOutputBytes: int(config.DefaultMaxOutputBytes),
		Function:       *function,
	}
	if err := t.Validate(ctx, m, pc); err != nil {
		c.printCallLogs(logs, *asJSON)
		return moduleError(path, err)
	}
	p, err := t.NewPool(ctx, m, pc)
	if err != nil {
		return moduleError(path, err)
	}
	defer p.Close(context.WithoutCancel(ctx))
	start := time.Now()
	out := new(runtime.Result)
	_ = p.CallInto(ctx, in, out) // out.Err; out.Usage is set even when the call failed
	took := time.Since(start)
	return c.printCall(out, took, logs, *asJSON)
}

func allowQueueName(q string) error {
	if !config.ValidQueueName(q) {
		return fmt.Errorf("%.80q is not a queue name (1-63 lower-case letters, digits or inner '-')", q)
	}
	return nil
}

func readAllLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than a binding accepts (%d bytes)", limit)
	}
	return b, nil
}

// statusNames name the outcome the host would settle the message by: the guest's verdict in
// the ABI's words (docs/abi.md), or failed.
var statusNames = map[outcome.Kind]string{outcome.KindDone: "ok", outcome.KindRetry: "retry", outcome.KindReject: "reject", outcome.KindFailed: "failed"}

type callResult struct {
	Status     string       `json:"status"`
	Cause      string       `json:"cause,omitempty"` // why a failed call failed (outcome.Cause)
	Error      string       `json:"error,omitempty"`
	Reason     string       `json:"reason,omitempty"`
	RetryAfter string       `json:"retry_after,omitempty"`
	Outputs    []callOutput `json:"outputs"`
	Logs       []callRecord `json:"logs"`
	Took       string       `json:"took"`
	Usage      callUsage    `json:"usage"`
}

// callUsage is the call's metering (runtime.Usage; docs/metering.md has the units).
type callUsage struct {
	Fuel         uint64 `json:"fuel"`
	WallUs       int64  `json:"wall_us"`
	HostUs       int64  `json:"host_us"`
	MemoryBytes  uint64 `json:"memory_bytes"`
	HTTPRequests int    `json:"http_requests"`
	HTTPBytes    int64  `json:"http_bytes"`
	// StartFuel is the part of Fuel the instance's start (its start function) spent,
	// StartUs its wall time (runtime.Usage.StartFuel, StartWall).
	StartFuel uint64 `json:"start_fuel"`
	StartUs   int64  `json:"start_us"`
}

type callOutput struct {
	Queue string `json:"queue"`
	Body  string `json:"body"`
}

func (c *cli) printCall(out *runtime.Result, took time.Duration, logs *callLog, asJSON bool) error {
	logs.mu.Lock()
	res := callResult{Outputs: []callOutput{}, Logs: append([]callRecord{}, logs.recs...), Took: took.Round(time.Microsecond).String()}
	logs.mu.Unlock()
	u := out.Usage
	res.Usage = callUsage{
		Fuel: u.Fuel, WallUs: u.Wall.Microseconds(), HostUs: u.HostTime.Microseconds(), MemoryBytes: u.MemoryBytes,
		HTTPRequests: u.HTTPRequests, HTTPBytes: u.HTTPBytes,
		StartFuel: u.StartFuel, StartUs: u.StartWall.Microseconds(),
	}
	// What a binding would settle the message by: the host's own translation.
	o := host.OutcomeOf(out)
	res.Status = statusNames[o.Kind]
	var failed error
	switch o.Kind {
	case outcome.KindFailed:
		res.Cause, res.Error = o.Cause.String(), out.Err.Error()
		failed = fmt.Errorf("call failed: %w", out.Err)
	default:
		res.Reason = out.ErrorText // an ok verdict's set_error too
		if out.RetryAfter > 0 {
			res.RetryAfter = out.RetryAfter.String()
		}
		if o.Kind == outcome.KindDone {
			for _, e := range out.Outputs {
				res.Outputs = append(res.Outputs, callOutput{Queue: e.Queue, Body: string(e.Body)})
			}
		} else {
			failed = fmt.Errorf("handler returned %s", res.Status)
		}
	}
	if asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
		return failed
	}
	fmt.Fprintf(c.stdout, "status: %s (%s)\n", res.Status, res.Took)
	if res.Cause != "" {
		fmt.Fprintf(c.stdout, "cause: %s\n", res.Cause)
	}
	if res.Error != "" {
		fmt.Fprintf(c.stdout, "error: %s\n", termSafe(res.Error))
	}
	if res.Reason != "" {
		fmt.Fprintf(c.stdout, "reason: %s\n", termSafe(res.Reason))
	}
	if res.RetryAfter != "" {
		fmt.Fprintf(c.stdout, "retry after: %s\n", res.RetryAfter)
	}
	fmt.Fprintf(c.stdout, "usage: fuel %d, wall %dµs, host %dµs, memory %d bytes, http %d requests %d bytes, start: fuel %d in %dµs\n",
		res.Usage.Fuel, res.Usage.WallUs, res.Usage.HostUs, res.Usage.MemoryBytes, res.Usage.HTTPRequests, res.Usage.HTTPBytes,
		res.Usage.StartFuel, res.Usage.StartUs)
	fmt.Fprintf(c.stdout, "outputs: %d\n", len(res.Outputs))
	for _, o := range res.Outputs {
		fmt.Fprintf(c.stdout, "  -> %s: %s\n", o.Queue, termSafe(o.Body))
	}
	c.printCallLogs(logs, false)
	return failed
}

func (c *cli) printCallLogs(logs *callLog, asJSON bool) {
	if asJSON {
		return
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.recs) == 0 {
		return
	}
	fmt.Fprintf(c.stdout, "logs: %d\n", len(logs.recs))
	for _, r := range logs.recs {
		fmt.Fprintf(c.stdout, "  %s %s: %s\n", r.Level, r.Source, termSafe(r.Message))
	}
}

// moduleError is the usage error of a module at path that does not load, naming the path
// once: most of the runtime's errors name it already.
func moduleError(path string, err error) error {
	if strings.Contains(err.Error(), path) {
		return &usageError{err: err}
	}
	return usagef("%s: %w", path, err)
}
