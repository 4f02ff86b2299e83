package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/runtime"
)

// ErrInvalidQueue reports a queue name that no tenant can own. It wraps
// runtime.ErrInvalidName, so a guest's emit of such a name gets ERR_INVALID.
var ErrInvalidQueue = fmt.Errorf("invalid queue name (%w)", runtime.ErrInvalidName)

// CheckOwnQueue refuses names that are not a queue of tenant's own on backend: a guest's
// emits and the CLI's sends alike. A "-poison" name is refused as reserved (ERR_DENIED for
// a guest), anything else as invalid (ERR_INVALID).
func CheckOwnQueue(cfg *config.Config, tenant, backend, q string) error {
	err := cfg.CheckQueue(tenant, backend, q)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, config.ErrReservedQueue):
		return fmt.Errorf("%.80q is not a queue a tenant may write to: %w", q, err)
	}
	return fmt.Errorf("%w: %.80q is not a queue of this tenant: %w", ErrInvalidQueue, q, err)
}

// OpenQueues opens tenant's queues on the backend of the first one, opened once for this
// call: close the returned Closer when done (it closes the backend).
func OpenQueues(ctx context.Context, cfg *config.Config, tenant string, queues ...string) ([]queue.Queue, io.Closer, error) {
	bname, err := cfg.QueueBackend(tenant, queues[0])
	if err != nil {
		return nil, nil, fmt.Errorf("open queue %s/%s: %w", tenant, queues[0], err)
	}
	for _, q := range queues {
		if err := CheckOwnQueue(cfg, tenant, bname, strings.TrimSuffix(q, config.PoisonSuffix)); err != nil {
			return nil, nil, fmt.Errorf("open queue %s/%s: %w", tenant, q, err)
		}
	}
	b, err := Open(ctx, cfg, bname, slog.Default())
	if err != nil {
		return nil, nil, fmt.Errorf("open queue %s/%s: %w", tenant, queues[0], err)
	}
	out := make([]queue.Queue, len(queues))
	for i, name := range queues {
		if out[i], err = b.Open(ctx, cfg.PhysicalQueue(tenant, bname, name)); err != nil {
			_ = b.Close()
			return nil, nil, fmt.Errorf("open queue %s/%s: %w", tenant, name, err)
		}
	}
	return out, b, nil
}
