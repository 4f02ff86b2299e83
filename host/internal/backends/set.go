package backends

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// Set opens each backend of a config once, on first use, and shares it: a running host's
// bindings, and the queues it opens for the admin API, use the same store and, for a
// memory backend, the same queues.
type Set struct {
	cfg *config.Config
	log *slog.Logger

	mu     sync.Mutex // held while a backend is opened, watched or closed
	open   map[string]queue.Backend
	closed bool
}

// NewSet returns a Set of cfg's backends, none opened yet.
func NewSet(cfg *config.Config, log *slog.Logger) *Set {
	return &Set{cfg: cfg, log: log, open: map[string]queue.Backend{}}
}

// Get returns the backend name, opening it on first use.
func (bs *Set) Get(ctx context.Context, name string) (queue.Backend, error) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b, ok := bs.open[name]; ok {
		return b, nil
	}
	if bs.closed {
		return nil, fmt.Errorf("backend %s: host closed", name)
	}
	b, err := Open(ctx, bs.cfg, name, bs.log)
	if err != nil {
		return nil, err
	}
	bs.open[name] = b
	return b, nil
}

// WatchExternal makes each local store opened so far wake its queues' listeners when
// another process (`wqhost send`) commits a message, until stop.
func (bs *Set) WatchExternal(ctx context.Context) (stop func()) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var watchers []*local.ExternalWatcher
	for name, b := range bs.open {
		if lb, ok := b.(*local.Backend); ok {
			w, err := lb.WatchExternal(ctx)
			if err != nil {
				bs.log.Warn("local backend: cross-process wake-up off; other processes' messages wait for the next poll", "backend", name, "err", err)
				continue
			}
			watchers = append(watchers, w)
		}
	}
	return func() {
		for _, w := range watchers {
			w.Close()
		}
	}
}

// Close closes every backend opened; Get fails from then on.
func (bs *Set) Close() error {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	var errs []error
	for name, b := range bs.open {
		if err := b.Close(); err != nil {
			errs = append(errs, fmt.Errorf("backend %s: %w", name, err))
		}
	}
	bs.open = map[string]queue.Backend{}
	bs.closed = true
	return errors.Join(errs...)
}
