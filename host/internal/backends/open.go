// Package backends opens the queue backends a config names (memory, the local store,
// Azure Storage queues) and a tenant's queues on them: Set opens each backend of a running
// host once and shares it between its bindings; OpenQueues opens queues on a backend of
// their own for the CLI. It checks that a tenant opens only its own queues (CheckOwnQueue).
//
// One lock, Set.mu, held while a backend is opened or closed; nothing else is locked
// under it.
package backends

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

// Open opens the named backend of cfg.
func Open(ctx context.Context, cfg *config.Config, name string, log *slog.Logger) (queue.Backend, error) {
	bc, ok := cfg.BackendFor(name)
	if !ok {
		return nil, fmt.Errorf("backend %q is not configured", name)
	}
	switch bc.Type {
	case config.BackendLocal:
		path := cfg.LocalPath(bc)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("backends.%s: %w", name, err)
		}
		sync := local.SyncFull
		if bc.Sync == "normal" {
			sync = local.SyncNormal
		}
		// The store refuses a body above the largest limits.max_message_bytes (and
		// max_output_bytes) a config can set, and never loads one into memory.
		b, err := local.Open(ctx, path, local.Options{Sync: sync, Logger: log, MaxBodyBytes: int64(config.MaxMessageBytesCap)})
		if err != nil {
			return nil, fmt.Errorf("backends.%s: %w", name, err)
		}
		return b, nil
	case config.BackendMemory:
		return memory.New(memory.Options{}), nil
	case config.BackendAzure:
		opts := azure.Options{
			AccountName: bc.AccountName, ServiceURL: bc.ServiceURL, DefaultCredential: bc.DefaultCredential,
			Encoding: azure.Encoding(bc.Encoding), CreateQueues: bc.CreateQueues, PoisonTTL: bc.PoisonTTL, Logger: log,
			PoisonFormat: azure.PoisonFormat(bc.PoisonFormat),
		}
		secret := func(key, env string) (string, error) {
			if env == "" {
				return "", nil
			}
			v := os.Getenv(env)
			if v == "" {
				return "", fmt.Errorf("backends.%s.%s: environment variable %s is empty or unset", name, key, env)
			}
			return v, nil
		}
		var errs []error
		var err error
		opts.ConnectionString, err = secret("connection_string_env", bc.ConnectionStringEnv)
		errs = append(errs, err)
		opts.AccountKey, err = secret("account_key_env", bc.AccountKeyEnv)
		errs = append(errs, err)
		opts.SASURL, err = secret("sas_url_env", bc.SASURLEnv)
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		b, err := azure.Open(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("backends.%s: %w", name, err)
		}
		return b, nil
	case config.BackendNATS:
		return openNATS(ctx, cfg, name, bc, log)
	}
	return nil, fmt.Errorf("backends.%s: unknown type %q", name, bc.Type)
}
