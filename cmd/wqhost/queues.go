package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
)

// configFlags adds --config and --data-dir, the flags every command that opens queues shares.
func configFlags(fl *pflag.FlagSet) *string {
	file := fl.String("config", "", "config file (YAML); default: the embedded default (local queue store under --data-dir)")
	fl.String("data-dir", "", "data directory of the local queue store (overrides data_dir; default ./data)")
	return file
}

// loadConfig loads the config the way `wqhost run` does: the file or the embedded default,
// WQHOST_… environment overrides, then the flags set on the command line.
func (c *cli) loadConfig(file string, fl *pflag.FlagSet) (*config.Config, error) {
	cfg, err := config.Load(config.LoadOptions{File: file, Flags: fl})
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, &usageError{err: err}
	}
	return cfg, nil
}

// openQueue opens a tenant's queue on the backend the config gives it, under its physical
// name (tenants other than "default" are namespaced). close releases the backend.
func openQueue(ctx context.Context, cfg *config.Config, tenant, queue string) (q listener.Queue, closeFn func() error, err error) {
	bname, err := cfg.QueueBackend(tenant, queue)
	if err != nil {
		return nil, nil, &usageError{err: err}
	}
	if bname == "" {
		bname = config.DefaultBackend
	}
	b, ok := cfg.BackendFor(bname)
	if !ok {
		return nil, nil, usagef("backend %q of tenant %q is not configured", bname, tenant)
	}
	name := cfg.PhysicalQueue(tenant, bname, queue)
	switch b.Type {
	case config.BackendLocal, "":
		path := cfg.LocalPath(b)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, nil, fmt.Errorf("data directory: %w", err)
		}
		sync := local.SyncFull
		if b.Sync == "normal" {
			sync = local.SyncNormal
		}
		st, err := local.Open(ctx, path, local.Options{Sync: sync})
		if err != nil {
			return nil, nil, err
		}
		lq, err := st.Queue(ctx, name)
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		return lq, st.Close, nil
	case config.BackendMemory:
		return nil, nil, usagef("queue %q of tenant %q is on backend %q of type memory: it lives inside the running host and cannot be reached from another process", queue, tenant, bname)
	default:
		return nil, nil, usagef("queue %q of tenant %q: backend %q of type %s is not supported by this command yet", queue, tenant, bname, b.Type)
	}
}
