package host

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/host/admin"
	"github.com/wqhost/wqhost/host/config"
)

// startParallelism is how many bindings New builds at once. Building one is mostly CPU
// (hashing the module bytes, instantiating it once to run its start function and self test)
// with some waiting on the backend (opening three queues: SQLite writes on the local store,
// round trips to Azure): twice GOMAXPROCS keeps every CPU busy while some builds wait,
// without holding thousands of validation instances in memory at once. At least 4, so a
// one-CPU host still overlaps Azure round trips. Compiling a module digest still happens
// once: concurrent compiles of the same bytes wait for the first (runtime.Engine.Compile).
func startParallelism() int { return max(4, 2*goruntime.GOMAXPROCS(0)) }

// Options are New's optional settings (NewWithOptions).
type Options struct {
	// AdminServing, when set, is called once the admin API serves, before any binding is
	// built (a start of thousands of bindings takes seconds: /readyz and /v1/status say how
	// far it got). wqhost run writes <data_dir>/host.json here, so the CLI finds a host
	// that is still starting.
	AdminServing func(addr net.Addr)
}

// NewWithOptions is New with opts.
func NewWithOptions(ctx context.Context, cfg *config.Config, logger *slog.Logger, opts Options) (*Host, error) {
	return newWithHooks(ctx, cfg, logger, startHooks{served: opts.AdminServing})
}

// startHooks let a test watch and hold a start.
type startHooks struct {
	served   func(admin net.Addr) // the admin API serves, before any binding is built
	building func(i int)          // binding i (config order) is about to be built
	built    func(b *binding)     // b is built
}

// bindingJob is one binding for New to build.
type bindingJob struct {
	t    *tenant
	name string
	cfg  config.Binding
}

// buildBindings builds jobs, at most par at once, counting each one built in h.startUp. It
// returns those built in the jobs' order and one error per binding that failed, naming it
// (tenants.<t>.bindings.<b>), in the same order. Every binding is tried, so one start
// reports every broken binding; only ctx ending stops it early, with one error saying how
// far it got. The caller closes what was built if there is any error.
func (h *Host) buildBindings(ctx context.Context, jobs []bindingJob, par int) ([]*binding, []error) {
	built := make([]*binding, len(jobs))
	failed := make([]error, len(jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(par, len(jobs)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(jobs) {
					return
				}
				j := jobs[i]
				if h.hooks.building != nil {
					h.hooks.building(i)
				}
				b, err := h.newBinding(ctx, j.t, j.name, j.cfg)
				if err != nil {
					failed[i] = fmt.Errorf("tenants.%s.bindings.%s: %w", j.t.name, j.name, err)
					continue
				}
				built[i] = b
				h.startUp.Add(1)
				if h.hooks.built != nil {
					h.hooks.built(b)
				}
			}
		})
	}
	wg.Wait()
	var binds []*binding
	var errs []error
	for i := range jobs {
		if built[i] != nil {
			binds = append(binds, built[i])
		}
		if failed[i] != nil {
			errs = append(errs, failed[i])
		}
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("start interrupted with %d of %d bindings up: %w", h.startUp.Load(), len(jobs), err))
	}
	return binds, errs
}

// Readiness reports whether the host is ready and, while New builds the bindings, how many
// of the config's are built; once ready, both counts are the bindings serving.
func (h *Host) Readiness() admin.Readiness {
	if h.starting.Load() {
		return admin.Readiness{Starting: true, BindingsUp: int(h.startUp.Load()), BindingsTotal: h.startTotal, Waiting: h.waitingFor()}
	}
	n := len(h.bindings())
	return admin.Readiness{Ready: h.Ready(), BindingsUp: n, BindingsTotal: n}
}

// serveAdmin serves the admin API on ln from New on, so that /readyz and /v1/status report
// the progress of a long start instead of leaving a probe's connection unanswered. An
// address that resolved beyond loopback without a host token is refused (the load-time
// check could not know where a host name resolves) unless admin.allow_unauthenticated;
// ln is closed then.
func (h *Host) serveAdmin(ln net.Listener) error {
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && tokenOf(h.cfg.Admin.TokenEnv) == "" {
		if !h.cfg.Admin.AllowUnauthenticated {
			_ = ln.Close()
			return fmt.Errorf("host: admin.addr %s listens on %s beyond loopback without admin.token_env (set it, or admin.allow_unauthenticated: true)", h.cfg.Admin.Addr, ln.Addr())
		}
		h.log.Warn("admin API reachable beyond loopback without a host token (admin.allow_unauthenticated)", "addr", ln.Addr().String())
	}
	h.adminMu.Lock()
	h.adminAddr = ln.Addr()
	hd, closeConsole := h.adminHandler()
	h.srv = admin.NewServer(hd, admin.Timeouts{})
	h.srv.RegisterOnShutdown(closeConsole) // its live streams would hold the shutdown
	h.srvErr = make(chan error, 1)
	srv, srvErr := h.srv, h.srvErr
	h.adminMu.Unlock()
	go func() { srvErr <- srv.Serve(ln) }()
	h.log.Info("admin API listening", "addr", ln.Addr().String(), "console", "http://"+ln.Addr().String()+"/console/")
	return nil
}

// stopAdmin shuts the admin server down, letting requests in progress finish for a few
// seconds. It is idempotent.
func (h *Host) stopAdmin() { h.stopAdminWithin(5 * time.Second) }

// stopAdminWithin is stopAdmin letting requests in progress finish for d.
func (h *Host) stopAdminWithin(d time.Duration) {
	h.adminMu.Lock()
	srv := h.srv
	h.srv = nil
	h.adminMu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close() // requests still in progress are cut off
	}
}
