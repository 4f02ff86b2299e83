package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/pflag"
	"github.com/wqhost/wqhost/host"
	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/host/source"
	"github.com/wqhost/wqhost/listener/queue"
)

// configFlags adds --config and --data-dir, the flags every command that opens queues shares.
func configFlags(fl *pflag.FlagSet) *string {
	file := fl.String("config", "", "config file (YAML); default: the embedded default (local queue store under --data-dir)")
	fl.String("data-dir", "", "data directory of the local queue store (overrides data_dir; default ./data)")
	return file
}

// loadConfig loads the config the way `wqhost run` does: the file or the embedded default,
// WQHOST_… environment overrides, then the flags set on the command line. Every failure is
// a configuration error (exit 2).
func (c *cli) loadConfig(file string, fl *pflag.FlagSet) (*config.Config, error) {
	cfg, err := source.LoadConfig(config.LoadOptions{File: file, Flags: fl})
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, &usageError{err: err}
	}
	return cfg, nil
}

// openQueue opens a tenant's queue through the config, as the host would. A tenant or queue
// the config does not know is a usage error.
func openQueue(ctx context.Context, cfg *config.Config, tenant, queue string) (queue.Queue, io.Closer, error) {
	q, closer, err := host.OpenQueue(ctx, cfg, tenant, queue)
	if err != nil {
		if errors.Is(err, config.ErrNotConfigured) || errors.Is(err, host.ErrInvalidQueue) {
			return nil, nil, &usageError{err: err}
		}
		return nil, nil, err
	}
	return q, closer, nil
}
