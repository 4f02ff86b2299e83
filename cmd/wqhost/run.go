package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/internal/buildinfo"
)

const runDoc = `
Runs the host: every binding of the config (or, with no --config, the embedded default: the
local queue store under --data-dir and the billing example handler reading the queue
"transactions" and writing priced lines to "priced") until SIGINT or SIGTERM, which drain it
gracefully: receiving stops, handlers in flight finish, leased messages not yet started are
released at once. Handlers still running when the 30 s grace ends are cancelled, and those that
cannot be stopped abandoned (exit 1, the log naming their messages, redelivered once their
visibility timeout passes): the process ends within the grace plus a few seconds whatever the
guests do. SIGHUP reloads the config and changed modules.
--demo loads the shipped billing sample (3000 transactions, a few malformed) into the default
binding's queue, processes it with a progress bar, prints a summary and exits.
Exit code 2 means the config is invalid or could not be built (a module that does not load).
A backend that cannot serve yet (no server reachable, a JetStream cluster without quorum,
storage down) is waited for instead: /readyz answers 503 naming the binding and the reason
until it serves.`

// lastResortSlack is how long past host.ShutdownBound the process waits for Run before it
// exits regardless.
const lastResortSlack = 5 * time.Second

func (c *cli) run(ctx context.Context, args []string) error {
	fl := c.flags("run", "[--config FILE] [--data-dir DIR] [--admin ADDR] [--demo]", runDoc)
	cfgFile := configFlags(fl)
	fl.String("admin", "", "admin API listen address (overrides admin.addr; default 127.0.0.1:8480; off disables it)")
	fl.String("log-level", "", "debug, info, warn or error (overrides log.level)")
	fl.String("log-format", "", "text or json (overrides log.format)")
	demo := fl.Bool("demo", false, "process the shipped billing sample on the embedded default, print a summary, exit")
	if err := c.parse(fl, args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return usagef("takes no arguments (got %q)", fl.Args())
	}
	if *demo && *cfgFile != "" {
		return usagef("--demo runs on the embedded default; it does not take --config")
	}
	cfg, err := c.loadConfig(*cfgFile, fl)
	if err != nil {
		return err
	}
	if *demo {
		if !fl.Changed("admin") {
			cfg.Admin.Addr = "off" // a demo must not fail because a real host holds the port
		}
		if !fl.Changed("log-level") {
			cfg.Log.Level = "error" // the summary reports the rejected transactions
		}
	}
	level := new(slog.LevelVar)
	logger, err := newLogger(cfg.Log, level, c.stderr)
	if err != nil {
		return &usageError{err: err}
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		// The first signal drains; restoring the default lets a second one end the process
		// at once, for an operator who will not wait for the grace period.
		<-ctx.Done()
		stop()
		// Run gives up on guests that do not stop (host.ShutdownBound); should anything else
		// still hold it, the process ends anyway, its leased messages redelivered as after a
		// crash.
		t := time.NewTimer(host.ShutdownBound(cfg) + lastResortSlack)
		defer t.Stop()
		select {
		case <-finished:
		case <-t.C:
			logger.Error("shutdown did not finish; exiting anyway", "after", host.ShutdownBound(cfg)+lastResortSlack)
			os.Exit(1)
		}
	}()
	if *demo {
		return c.demo(ctx, cfg, logger)
	}
	bi := buildinfo.Read()
	configPath := "(embedded default)"
	if *cfgFile != "" {
		configPath = *cfgFile
		if abs, err := filepath.Abs(*cfgFile); err == nil {
			configPath = abs
		}
	}
	logger.Info("wqhost starting", "version", bi.Version, "commit", bi.CommitString(), "go", bi.GoVersion, "config", configPath, "data_dir", cfg.DataDir)
	// The CLI's send, peek, poison and status find the host through <data_dir>/host.json
	// (hostfile.go), written as soon as the admin API serves: a start of many bindings
	// takes a while, and status shows its progress.
	removeHostFile := func() {}
	h, err := host.NewWithOptions(ctx, cfg, logger, host.Options{AdminServing: func(addr net.Addr) {
		remove, err := writeHostFile(cfg.DataDir, addr)
		if err != nil {
			logger.Warn("the CLI will not find this host through its data directory", "err", err)
			return
		}
		removeHostFile = remove
	}})
	defer func() { removeHostFile() }()
	if errors.Is(err, host.ErrAdminListen) {
		return err // exit 1: the config is fine, the port is taken
	}
	if err != nil {
		// The config loaded, but a binding could not be built from it (module, plugin,
		// backend): still a configuration problem, and nothing was left running.
		return &usageError{err: err}
	}
	// A reload that changes log.level sets it here; --log-level, re-applied, still wins.
	h.SetLogLevel(level)
	// A reload re-reads the config with the same file, environment and flags as at start.
	h.SetConfigLoader(func() (*config.Config, error) {
		return source.LoadConfig(config.LoadOptions{File: *cfgFile, Flags: fl})
	})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				logger.Info("SIGHUP: reloading")
				if err := h.Reload(ctx); err != nil {
					logger.Warn("reload failed; the running config stays", "err", err)
				}
			}
		}
	}()
	if err := h.Run(ctx); err != nil {
		return err
	}
	return nil
}

// secondsAttr writes a duration attribute as <key>_seconds, a number of seconds.
func secondsAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key+"_seconds", a.Value.Duration().Seconds())
	}
	return a
}

// newLogger builds the host's slog logger from the config's log section, filtering on
// level (set to log.level), which a config reload may change.
func newLogger(lc config.Log, level *slog.LevelVar, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(lc.Level)); err != nil && lc.Level != "" {
		return nil, fmt.Errorf("log.level %q: want debug, info, warn or error", lc.Level)
	}
	level.Set(l)
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(lc.Format) {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		// A duration would be an integer of nanoseconds with no unit: seconds, named so.
		opts.ReplaceAttr = secondsAttr
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, errors.New("log.format " + lc.Format + ": want text or json")
}
