// Package external runs policies (listener.Backoff, Scaler, PoisonPolicy) in an external
// plugin process over hashicorp/go-plugin's gRPC protocol (wqhost.policy.v1, see
// docs/plugins.md), so that a misbehaving plugin can never stall or crash a listener.
//
// Start launches the binary and health-checks it. Every call then carries a deadline
// (Config.CallTimeout): a late, failed or invalid answer is replaced by the fallback policy's
// answer, and every answer is clamped to Config.Limits. A plugin that dies is restarted with
// exponential back-off while the fallback answers; Reload swaps in a new binary; Close kills
// the process. File watching is left to the host: call Reload when the binary changes.
package external

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wqhost/wqhost/internal/clock"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/plugins/internal/handshake"
	policyv1 "github.com/wqhost/wqhost/plugins/proto"
)

// Phase is the supervisor's view of the plugin process.
type Phase string

// Phases reported by Status.
const (
	PhaseRunning    Phase = "running"
	PhaseRestarting Phase = "restarting"
	PhaseFailed     Phase = "failed"
	PhaseClosed     Phase = "closed"
)

// Status is a snapshot for the host's status page and metrics. Counters are cumulative.
type Status struct {
	Path  string
	Name  string // the plugin's self-declared name
	Phase Phase
	Pid   int // 0 while no process runs

	// Capabilities the running (or last) process declared.
	Backoff, Scaler, Poison bool

	Restarts    uint64 // successful restarts after a crash (Reload not included)
	Reloads     uint64
	LastError   string
	LastErrorAt time.Time

	Calls     uint64 // policy calls made through this plugin's wrappers
	Timeouts  uint64 // calls that passed CallTimeout
	Errors    uint64 // calls that failed otherwise (transport, invalid answer)
	Fallbacks uint64 // calls answered by the fallback (plugin down, late, failed, or lacking the policy)
	Clamped   uint64 // answers changed to fit Limits
}

// ErrClosed is returned by Reload after Close.
var ErrClosed = errors.New("external plugin closed")

type instance struct {
	client *plugin.Client
	raw    *handshake.Client
	caps   *policyv1.DescribeResponse
	pid    int
	done   chan struct{} // closed when the instance is retired
	once   sync.Once
	// timeouts counts consecutive calls past the deadline; a success resets it.
	timeouts atomic.Int32
}

func (i *instance) retire() {
	i.once.Do(func() { close(i.done) })
}

// Plugin is a running external policy plugin and its supervisor. Its methods are safe for
// concurrent use.
type Plugin struct {
	cfg   Config
	log   *slog.Logger
	clock clock.Clock

	cur atomic.Pointer[instance]

	fbBackoff listener.Backoff
	fbScaler  listener.Scaler
	fbPoison  listener.PoisonPolicy

	backoff listener.Backoff
	scaler  listener.Scaler
	poison  listener.PoisonPolicy

	mu          sync.Mutex // guards the fields below and instance swaps
	phase       Phase
	lastCaps    *policyv1.DescribeResponse
	lastPid     int
	restarts    uint64
	reloads     uint64
	lastErr     string
	lastErrAt   time.Time
	closed      bool
	down        chan struct{} // wakes the supervisor; buffered 1
	stop        chan struct{} // closed by Close
	supervisorW sync.WaitGroup
	kills       sync.WaitGroup // background kills of retired instances; Close waits for them

	calls, timeouts, errs, fallbacks, clamped atomic.Uint64
}

// Start launches the plugin at cfg.Path, checks its handshake and capabilities, and starts
// its supervisor. fallback values are the policies that answer while the plugin cannot: each
// value is used for every policy interface it implements (typically the binding's built-in
// Backoff, Scaler and PoisonPolicy). Where none is given a conservative default is used.
//
// A missing binary, one that is not a wqhost policy plugin, or one that declares no policy is
// an error naming the path. The handshake is bounded by Config.StartTimeout and capability
// discovery also by ctx; the plugin itself lives until Close, whatever happens to ctx.
func Start(ctx context.Context, cfg Config, fallback ...any) (*Plugin, error) {
	cfg = cfg.withDefaults()
	if cfg.Path == "" {
		return nil, errors.New("external plugin: empty path")
	}
	if err := checkBinary(cfg.Path); err != nil {
		return nil, err
	}
	p := &Plugin{
		cfg:   cfg,
		log:   cfg.Logger.With("plugin", cfg.Path),
		clock: cfg.Clock,
		down:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
	}
	for i, f := range fallback {
		used := false
		if b, ok := f.(listener.Backoff); ok {
			p.fbBackoff, used = b, true
		}
		if s, ok := f.(listener.Scaler); ok {
			p.fbScaler, used = s, true
		}
		if pp, ok := f.(listener.PoisonPolicy); ok {
			p.fbPoison, used = pp, true
		}
		if !used {
			return nil, fmt.Errorf("external plugin %s: fallback %d (%T) implements no policy interface", cfg.Path, i, f)
		}
	}
	if p.fbBackoff == nil {
		p.fbBackoff = defaultBackoff{limits: cfg.Limits}
	}
	if p.fbScaler == nil {
		p.fbScaler = defaultScaler{}
	}
	if p.fbPoison == nil {
		p.fbPoison = defaultPoison{}
	}

	inst, err := p.launch(ctx)
	if err != nil {
		return nil, err
	}
	p.install(inst)
	p.phase = PhaseRunning
	p.backoff = &backoffPolicy{p: p}
	p.scaler = &scalerPolicy{p: p}
	p.poison = &poisonPolicy{p: p}
	p.supervisorW.Add(1)
	go p.supervise()
	p.log.Info("policy plugin started", "name", inst.caps.GetName(), "pid", inst.pid,
		"backoff", inst.caps.GetBackoff(), "scaler", inst.caps.GetScaler(), "poison", inst.caps.GetPoison())
	return p, nil
}

func checkBinary(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("external plugin %s: %w", path, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("external plugin %s: is a directory, not an executable", path)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("external plugin %s: not executable (mode %v)", path, fi.Mode().Perm())
	}
	return nil
}

// launch starts one process and discovers its capabilities.
func (p *Plugin) launch(ctx context.Context) (*instance, error) {
	cmd := exec.Command(p.cfg.Path, p.cfg.Args...)
	cmd.Env = append([]string(nil), p.cfg.Env...)
	setProcAttr(cmd)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  handshake.Config(),
		Plugins:          plugin.PluginSet{handshake.PluginName: handshake.HostPlugin{}},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           newSlogHCLog(p.log),
		StartTimeout:     p.cfg.StartTimeout,
	})
	fail := func(what string, err error) (*instance, error) {
		client.Kill()
		return nil, fmt.Errorf("external plugin %s: %s: %w", p.cfg.Path, what, err)
	}
	rpc, err := client.Client()
	if err != nil {
		return fail("not a wqhost policy plugin or failed to start", err)
	}
	raw, err := rpc.Dispense(handshake.PluginName)
	if err != nil {
		return fail("dispense "+handshake.PluginName, err)
	}
	rc, ok := raw.(*handshake.Client)
	if !ok {
		return fail("dispense", fmt.Errorf("unexpected client type %T", raw))
	}
	if err := rpc.Ping(); err != nil {
		return fail("health check", err)
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	caps, err := rc.Capabilities.Describe(dctx, &policyv1.DescribeRequest{})
	cancel()
	if err != nil {
		return fail("capability discovery (wqhost.policy.v1.Capabilities/Describe)", err)
	}
	if !caps.GetBackoff() && !caps.GetScaler() && !caps.GetPoison() {
		return fail("capability discovery", errors.New("plugin declares no policy"))
	}
	inst := &instance{client: client, raw: rc, caps: caps, done: make(chan struct{})}
	if rcfg := client.ReattachConfig(); rcfg != nil {
		inst.pid = rcfg.Pid
	}
	return inst, nil
}

// install makes inst the current instance and watches its health.
func (p *Plugin) install(inst *instance) {
	p.mu.Lock()
	old := p.cur.Swap(inst)
	p.lastCaps = inst.caps
	p.lastPid = inst.pid
	p.mu.Unlock()
	if old != nil {
		p.retire(old)
	}
	go p.watch(inst)
}

// retire stops an instance's watcher and kills its process in the background, so that a
// caller never waits for go-plugin's graceful shutdown.
func (p *Plugin) retire(inst *instance) {
	inst.retire()
	p.kills.Go(inst.client.Kill)
}

// watch pings inst every HealthInterval until it is retired or found dead.
func (p *Plugin) watch(inst *instance) {
	for {
		select {
		case <-inst.done:
			return
		case <-p.clock.After(p.cfg.HealthInterval):
		}
		select {
		case <-inst.done:
			return
		default:
		}
		if inst.client.Exited() {
			p.markDown(inst, errors.New("plugin process exited"))
			return
		}
		rpc, err := inst.client.Client()
		if err == nil {
			err = rpc.Ping()
		}
		if err != nil {
			p.markDown(inst, fmt.Errorf("health check: %w", err))
			return
		}
	}
}

// markDown retires inst if it is still current and wakes the supervisor.
func (p *Plugin) markDown(inst *instance, err error) {
	p.mu.Lock()
	if p.closed || !p.cur.CompareAndSwap(inst, nil) {
		p.mu.Unlock()
		return
	}
	p.phase = PhaseRestarting
	p.lastPid = 0
	p.setErrLocked(err)
	p.mu.Unlock()
	p.log.Warn("policy plugin down; fallback answers until it restarts", "pid", inst.pid, "err", err)
	p.retire(inst)
	select {
	case p.down <- struct{}{}:
	default:
	}
}

func (p *Plugin) setErrLocked(err error) {
	p.lastErr = err.Error()
	p.lastErrAt = p.clock.Now()
}

func (p *Plugin) recordErr(err error) {
	p.mu.Lock()
	p.setErrLocked(err)
	p.mu.Unlock()
}

// supervise restarts the plugin after each crash, with doubling waits.
func (p *Plugin) supervise() {
	defer p.supervisorW.Done()
	for {
		select {
		case <-p.stop:
			return
		case <-p.down:
		}
		for attempt := 0; ; attempt++ {
			if p.cur.Load() != nil { // a Reload got there first
				break
			}
			if p.cfg.MaxRestarts > 0 && attempt >= p.cfg.MaxRestarts {
				p.mu.Lock()
				p.phase = PhaseFailed
				p.mu.Unlock()
				p.log.Error("policy plugin failed: giving up restarts until Reload", "attempts", attempt)
				break
			}
			select {
			case <-p.stop:
				return
			case <-p.clock.After(restartDelay(attempt, p.cfg.RestartMin, p.cfg.RestartMax)):
			}
			ctx, cancel := context.WithTimeout(context.Background(), p.cfg.StartTimeout)
			inst, err := p.launch(ctx)
			cancel()
			if err != nil {
				p.recordErr(err)
				p.log.Warn("policy plugin restart failed", "attempt", attempt+1, "err", err)
				continue
			}
			if !p.installIfDown(inst, true) {
				p.retire(inst)
			}
			break
		}
	}
}

// installIfDown installs inst unless the plugin is closed or another instance is current.
func (p *Plugin) installIfDown(inst *instance, restart bool) bool {
	p.mu.Lock()
	if p.closed || p.cur.Load() != nil {
		p.mu.Unlock()
		return false
	}
	p.cur.Store(inst)
	p.lastCaps = inst.caps
	p.lastPid = inst.pid
	p.phase = PhaseRunning
	if restart {
		p.restarts++
	}
	p.mu.Unlock()
	go p.watch(inst)
	p.log.Info("policy plugin restarted", "pid", inst.pid)
	return true
}

// Reload starts a new process from Path (typically after the binary changed on disk) and
// swaps it in once healthy; the old process is then killed. If the new one fails to start,
// the old one keeps serving and the error is returned. Reload also revives a failed plugin.
func (p *Plugin) Reload(ctx context.Context) error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return fmt.Errorf("reload %s: %w", p.cfg.Path, ErrClosed)
	}
	if err := checkBinary(p.cfg.Path); err != nil {
		p.recordErr(err)
		return fmt.Errorf("reload: %w", err)
	}
	inst, err := p.launch(ctx)
	if err != nil {
		p.recordErr(err)
		return fmt.Errorf("reload: %w", err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.retire(inst)
		return fmt.Errorf("reload %s: %w", p.cfg.Path, ErrClosed)
	}
	old := p.cur.Swap(inst)
	p.lastCaps = inst.caps
	p.lastPid = inst.pid
	p.phase = PhaseRunning
	p.reloads++
	p.mu.Unlock()
	if old != nil {
		p.retire(old)
	}
	go p.watch(inst)
	p.log.Info("policy plugin reloaded", "pid", inst.pid)
	return nil
}

// Close kills the plugin process (and any being replaced) and waits for them to exit. The policies keep answering from
// the fallback afterwards, so a listener that outlives its plugin still works.
func (p *Plugin) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.phase = PhaseClosed
	p.lastPid = 0
	inst := p.cur.Swap(nil)
	close(p.stop)
	p.mu.Unlock()
	p.supervisorW.Wait()
	if inst != nil {
		inst.retire()
		inst.client.Kill() // waits for the process to be reaped
	}
	p.kills.Wait()
	return nil
}

// Status returns a snapshot of the plugin's state and counters.
func (p *Plugin) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{
		Path:        p.cfg.Path,
		Phase:       p.phase,
		Pid:         p.lastPid,
		Restarts:    p.restarts,
		Reloads:     p.reloads,
		LastError:   p.lastErr,
		LastErrorAt: p.lastErrAt,
		Calls:       p.calls.Load(),
		Timeouts:    p.timeouts.Load(),
		Errors:      p.errs.Load(),
		Fallbacks:   p.fallbacks.Load(),
		Clamped:     p.clamped.Load(),
	}
	if c := p.lastCaps; c != nil {
		st.Name, st.Backoff, st.Scaler, st.Poison = c.GetName(), c.GetBackoff(), c.GetScaler(), c.GetPoison()
	}
	return st
}

// Backoff returns the plugin's back-off policy, or the fallback when the plugin did not
// declare one at Start.
func (p *Plugin) Backoff() listener.Backoff {
	if !p.Status().Backoff {
		return p.fbBackoff
	}
	return p.backoff
}

// Scaler returns the plugin's scaler, or the fallback when the plugin did not declare one.
func (p *Plugin) Scaler() listener.Scaler {
	if !p.Status().Scaler {
		return p.fbScaler
	}
	return p.scaler
}

// Poison returns the plugin's poison policy, or the fallback when the plugin did not declare
// one.
func (p *Plugin) Poison() listener.PoisonPolicy {
	if !p.Status().Poison {
		return p.fbPoison
	}
	return p.poison
}

// callFailed accounts for a failed call and marks the instance down when the failure says
// the process or its connection is gone.
func (p *Plugin) callFailed(ctx context.Context, inst *instance, method string, err error) {
	if ctx.Err() != nil {
		return // the caller gave up; not the plugin's fault
	}
	code := status.Code(err)
	if code == codes.DeadlineExceeded {
		p.timeouts.Add(1)
		err := fmt.Errorf("%s: no answer within %v", method, p.cfg.CallTimeout)
		if n := inst.timeouts.Add(1); p.cfg.MaxTimeouts > 0 && int(n) >= p.cfg.MaxTimeouts {
			// A plugin that never answers in time costs every caller the full deadline:
			// restart it rather than pay that for ever.
			p.markDown(inst, fmt.Errorf("%d consecutive timeouts, restarting: %w", n, err))
			return
		}
		p.recordErr(err)
		return
	}
	p.errs.Add(1)
	err = fmt.Errorf("%s: %w", method, err)
	if code == codes.Unavailable || code == codes.Canceled || inst.client.Exited() {
		p.markDown(inst, err)
		return
	}
	p.recordErr(err)
}
