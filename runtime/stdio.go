package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"
)

// Exit codes of the wasi-stdio ABI.
const (
	exitTempFail = 75 // EX_TEMPFAIL: retry
	exitDataErr  = 65 // EX_DATAERR: reject
)

// cappedLog sends guest stdout/stderr lines to the log until a per-call byte budget is spent.
type cappedLog struct {
	logger *slog.Logger
	limit  int
	used   int
	who    callee // the call's message (a batch's first, and its size), which every line names
	warned bool
}

func (c *cappedLog) reset(who callee) { c.used, c.who, c.warned = 0, who, false }

func (c *cappedLog) Write(b []byte) (int, error) {
	n := len(b)
	if c.used >= c.limit {
		if !c.warned {
			c.warned = true
			c.logger.Warn("guest output truncated", c.who.logAttrs("cap_bytes", c.limit)...)
		}
		return n, nil
	}
	if room := c.limit - c.used; len(b) > room {
		b = b[:room]
	}
	c.used += len(b)
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		c.logger.Info(line, c.who.logAttrs("source", "guest-stdio")...)
	}
	return n, nil
}

// cappedBuf collects stdout up to a limit and notes an overflow.
type cappedBuf struct {
	bytes.Buffer
	limit    int
	overflow bool
}

func (c *cappedBuf) Write(b []byte) (int, error) {
	if c.Len()+len(b) > c.limit {
		c.overflow = true
		return 0, errors.New("stdout exceeds the output size limit")
	}
	return c.Buffer.Write(b)
}

// envKey turns a config key into the suffix of WQHOST_CONFIG_<KEY>.
func envKey(k string) string {
	b := []byte(strings.ToUpper(k))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// callStdio runs a fresh command instance: stdin is the body, stdout the output.
func (p *Pool) callStdio(ctx context.Context, in *Input) (*Result, error) {
	if _, err := p.slots.acquire(ctx); err != nil {
		return nil, fmt.Errorf("runtime: message %s: waiting for a slot: %w", in.ID, err)
	}
	if p.closed.Load() {
		p.slots.unacquire(nil)
		return nil, fmt.Errorf("runtime: message %s: %w", in.ID, ErrPoolClosed)
	}
	defer p.slots.release(nil)
	parent := ctx
	if p.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.Timeout)
		defer cancel()
	}
	// The call's state charges its WASI calls (charge.go); with no limits armed, ending ctx
	// is what stops them, as it stops the guest's own code.
	ctx = context.WithValue(ctx, stateKey{}, &callState{pool: p})
	stdout := &cappedBuf{limit: p.cfg.MaxOutputBytes}
	logw := &cappedLog{logger: p.logger, limit: p.cfg.StdioCapBytes, who: callee{id: in.ID}}
	var stderr bytes.Buffer
	mc := p.moduleConfig(logw).WithStdin(bytes.NewReader(in.Body)).WithStdout(stdout).
		WithStderr(multiWriter{&stderr, logw}).
		WithEnv("WQHOST_MESSAGE_ID", in.ID).WithEnv("WQHOST_QUEUE", in.Queue).
		WithEnv("WQHOST_TENANT", p.t.name).WithEnv("WQHOST_BINDING", p.cfg.Binding).
		WithEnv("WQHOST_DEQUEUE_COUNT", strconv.FormatInt(in.DequeueCount, 10)).
		WithEnv("WQHOST_MAX_OUTPUT_BYTES", strconv.Itoa(p.cfg.MaxOutputBytes)).
		WithEnv("WQHOST_INSERTED_AT", in.InsertedAt.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"))
	for k, v := range p.cfg.Config {
		mc = mc.WithEnv("WQHOST_CONFIG_"+envKey(k), v)
	}
	// The allocator enforces the memory limit (instanceMemory), which wazero leaves to it,
	// and reserves from the tenant's budget; once InstantiateModule returned the command
	// has ended, so the memory is unmapped at once.
	if err := p.t.mem.reserve(ConsumerInstances, p.m.c.instanceHeap, p.memWhat+" tables and globals"); err != nil {
		return nil, fmt.Errorf("runtime: message %s: %w", in.ID, err)
	}
	defer p.t.mem.release(ConsumerInstances, p.m.c.instanceHeap)
	im := &instanceMemory{g: p.t.e.memories, limit: p.memLimit, budget: p.t.mem, what: p.memWhat}
	mod, err := p.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, im), p.cm, mc)
	if mod != nil {
		_ = mod.Close(context.Background())
	}
	im.settle(nil)
	if be := im.overdrawn(); be != nil {
		return nil, fmt.Errorf("runtime: message %s: %w", in.ID, be)
	}
	code := uint32(0)
	if be := im.takeRefusal(); err != nil && be != nil {
		var exit *sys.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 0 {
			p.traps.Add(1)
			return nil, fmt.Errorf("runtime: message %s: %w: %w", in.ID, be, err)
		}
	}
	if err != nil {
		var exit *sys.ExitError
		if !errors.As(err, &exit) {
			p.traps.Add(1)
			return nil, fmt.Errorf("runtime: message %s: %w: %w", in.ID, ErrTrap, err)
		}
		code = exit.ExitCode()
		switch {
		case parent.Err() != nil:
			return nil, fmt.Errorf("runtime: message %s: call abandoned: %w", in.ID, context.Cause(parent))
		case code == sys.ExitCodeDeadlineExceeded || code == sys.ExitCodeContextCanceled && ctx.Err() != nil:
			p.timeouts.Add(1)
			return nil, fmt.Errorf("runtime: message %s: %w (%s): %w", in.ID, ErrTimeout, p.cfg.Timeout, err)
		}
	}
	reason := lastLine(stderr.String())
	out := &Result{ErrorText: reason}
	switch code {
	case 0:
		if stdout.overflow {
			return nil, &outputError{fmt.Sprintf("runtime: message %s: stdout exceeds %d bytes", in.ID, p.cfg.MaxOutputBytes)}
		}
		out.Verdict = VerdictOK
		if stdout.Len() > 0 && p.cfg.OutputQueue != "" {
			out.Outputs = append(out.first[:0], Emitted{Queue: p.cfg.OutputQueue, Body: stdout.Bytes()})
		}
		return out, nil
	case exitTempFail:
		out.Verdict = VerdictRetry
		return out, nil
	case exitDataErr:
		out.Verdict = VerdictReject
		return out, nil
	}
	return nil, exitFailure(in.ID, code, reason)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > maxLogLine {
		s = s[:maxLogLine]
	}
	return s
}

type multiWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (m multiWriter) Write(b []byte) (int, error) {
	if m.a.(*bytes.Buffer).Len() < 64<<10 {
		m.a.Write(b)
	}
	return m.b.Write(b)
}
