package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/memory"
)

// openBackend opens the named backend of cfg.
func openBackend(ctx context.Context, cfg *config.Config, name string, log *slog.Logger) (listener.Backend, error) {
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
		b, err := local.Open(ctx, path, local.Options{Sync: sync, Logger: log})
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
	}
	return nil, fmt.Errorf("backends.%s: unknown type %q", name, bc.Type)
}

// OpenQueue opens a tenant's queue (its tenant-local name, e.g. "transactions" or
// "transactions-poison") through the same config a running host uses, without starting
// anything: for `wqhost send` and the poison commands. Close the returned Closer when done
// (it closes the backend). Note that a memory backend is private to this call.
func OpenQueue(ctx context.Context, cfg *config.Config, tenant, queue string) (listener.Queue, io.Closer, error) {
	qs, closer, err := openQueues(ctx, cfg, tenant, queue)
	if err != nil {
		return nil, nil, err
	}
	return qs[0], closer, nil
}

// openQueues opens tenant's queues on the backend of the first one, opened once.
func openQueues(ctx context.Context, cfg *config.Config, tenant string, queues ...string) ([]listener.Queue, io.Closer, error) {
	bname, err := cfg.QueueBackend(tenant, queues[0])
	if err != nil {
		return nil, nil, fmt.Errorf("open queue %s/%s: %w", tenant, queues[0], err)
	}
	for _, q := range queues {
		if err := allowOwnQueue(cfg, tenant, bname, strings.TrimSuffix(q, config.PoisonSuffix)); err != nil {
			return nil, nil, fmt.Errorf("open queue %s/%s: %w", tenant, q, err)
		}
	}
	b, err := openBackend(ctx, cfg, bname, slog.Default())
	if err != nil {
		return nil, nil, fmt.Errorf("open queue %s/%s: %w", tenant, queues[0], err)
	}
	out := make([]listener.Queue, len(queues))
	for i, name := range queues {
		if out[i], err = b.Open(ctx, cfg.PhysicalQueue(tenant, bname, name)); err != nil {
			_ = b.Close()
			return nil, nil, fmt.Errorf("open queue %s/%s: %w", tenant, name, err)
		}
	}
	return out, b, nil
}

// OpenQueue opens a tenant's queue on the running host's own backends (the same store, and
// for a memory backend the same queues the bindings use).
func (h *Host) OpenQueue(ctx context.Context, tenant, queue string) (listener.Queue, error) {
	bname, err := h.live.Load().QueueBackend(tenant, queue)
	if err != nil {
		return nil, fmt.Errorf("open queue %s/%s: %w", tenant, queue, err)
	}
	if err := allowOwnQueue(h.cfg, tenant, bname, strings.TrimSuffix(queue, config.PoisonSuffix)); err != nil {
		return nil, fmt.Errorf("open queue %s/%s: %w", tenant, queue, err)
	}
	b, err := h.backs.get(ctx, bname)
	if err != nil {
		return nil, err
	}
	return b.Open(ctx, h.cfg.PhysicalQueue(tenant, bname, queue))
}

// DeadLetter is one message of a <queue>-poison queue, with what the listener recorded.
type DeadLetter struct {
	ID             string            `json:"id"`
	Body           []byte            `json:"body"`
	Reason         string            `json:"reason"`
	OriginalID     string            `json:"original_id"`
	OriginalQueue  string            `json:"original_queue"`
	DequeueCount   int               `json:"dequeue_count"`
	DeadLetteredAt string            `json:"dead_lettered_at"`
	HandlerVersion string            `json:"handler_version,omitempty"`
	Attributes     map[string]string `json:"attributes,omitempty"`
	// Repeats counts further dead letters of the same original message, listed as this
	// one: without transactions (Azure) a message whose lease ran out before its dead
	// letter's delete can be dead-lettered again by the listener that got it next.
	Repeats int `json:"repeats,omitempty"`
}

func deadLetterOf(m *listener.Message) DeadLetter {
	a := m.Attributes
	n, _ := strconv.Atoi(a[listener.AttrDequeueCount])
	return DeadLetter{
		ID: m.ID, Body: m.Body, Reason: a[listener.AttrReason], OriginalID: a[listener.AttrOriginalID],
		OriginalQueue: a[listener.AttrOriginalQueue], DequeueCount: n,
		DeadLetteredAt: a[listener.AttrDeadLetteredAt], HandlerVersion: a[listener.AttrHandlerVersion],
		Attributes: userAttributes(a),
	}
}

// userAttributes drops the dead-letter bookkeeping, keeping what the message came with.
func userAttributes(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		switch k {
		case listener.AttrReason, listener.AttrOriginalID, listener.AttrOriginalQueue,
			listener.AttrDequeueCount, listener.AttrDeadLetteredAt, listener.AttrHandlerVersion:
			continue
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// peekLease is how long listing holds dead letters before releasing them.
const peekLease = 30 * time.Second

// withPoison opens tenant's <queue>-poison and runs fn on it.
func withPoison(ctx context.Context, cfg *config.Config, tenant, queue string, fn func(dead listener.Queue) error) error {
	dead, closer, err := OpenQueue(ctx, cfg, tenant, strings.TrimSuffix(queue, config.PoisonSuffix)+config.PoisonSuffix)
	if err != nil {
		return err
	}
	defer closer.Close()
	return fn(dead)
}

// drain leases the visible messages of dead in batches and calls fn for each, which settles
// it or leaves it leased. At most limit messages (0 = all); it returns how many fn took.
func drain(ctx context.Context, dead listener.Queue, limit int, fn func(m *listener.Message) error) (int, error) {
	n := 0
	for limit <= 0 || n < limit {
		want := listener.MaxBatch
		if limit > 0 {
			want = min(want, limit-n)
		}
		ms, err := dead.Receive(ctx, want, peekLease)
		if err != nil {
			return n, fmt.Errorf("%s: receive: %w", dead.Name(), err)
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if err := fn(m); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// ListDeadLetters returns up to limit (0 = all) dead letters of tenant's queue (its
// <queue>-poison), repeats of one original message as one entry (DeadLetter.Repeats). Listing leases them briefly and releases them at once, which counts as a
// dequeue on backends that count.
func ListDeadLetters(ctx context.Context, cfg *config.Config, tenant, queue string, limit int) ([]DeadLetter, error) {
	var out []DeadLetter
	err := withPoison(ctx, cfg, tenant, queue, func(dead listener.Queue) error {
		var leased []*listener.Message
		byOriginal := map[string]int{} // original id -> index in out
		_, err := drain(ctx, dead, limit, func(m *listener.Message) error {
			leased = append(leased, m)
			d := deadLetterOf(m)
			if i, ok := byOriginal[d.OriginalID]; ok && d.OriginalID != "" {
				out[i].Repeats++
				return nil
			}
			byOriginal[d.OriginalID] = len(out)
			out = append(out, d)
			return nil
		})
		var errs []error
		for _, m := range leased {
			if rerr := dead.UpdateVisibility(ctx, m, 0); rerr != nil {
				errs = append(errs, fmt.Errorf("release %s: %w", m.ID, rerr))
			}
		}
		return errors.Join(append([]error{err}, errs...)...)
	})
	return out, err
}

// RequeueDeadLetters moves up to limit (0 = all) dead letters of tenant's queue back to the
// queue: each is sent again with its original attributes (the dead-letter bookkeeping
// dropped), then deleted from <queue>-poison. It returns how many moved.
func RequeueDeadLetters(ctx context.Context, cfg *config.Config, tenant, queue string, limit int) (int, error) {
	queue = strings.TrimSuffix(queue, config.PoisonSuffix)
	qs, closer, err := openQueues(ctx, cfg, tenant, queue, queue+config.PoisonSuffix)
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	dst, dead := qs[0], qs[1]
	// On Azure (no transactions) a message can be dead-lettered twice, by a listener whose
	// lease ran out before its delete and by the one that got the redelivery: repeats of one
	// original id are requeued once, the others only deleted.
	requeued := map[string]bool{}
	return drain(ctx, dead, limit, func(m *listener.Message) error {
		if orig := m.Attributes[listener.AttrOriginalID]; orig != "" {
			if requeued[orig] {
				if err := dead.Delete(ctx, m); err != nil {
					return fmt.Errorf("requeue %s: delete repeated dead letter of %s: %w", m.ID, orig, err)
				}
				return nil
			}
			requeued[orig] = true
		}
		opts := listener.SendOptions{Attributes: userAttributes(m.Attributes)}
		// A store with transactions (local) moves the dead letter back in one: a requeue
		// cut short can neither lose it nor leave it in both queues.
		if mv, ok := dead.(listener.Mover); ok {
			err := mv.MoveTo(ctx, m, dst, m.Body, opts)
			if err == nil {
				return nil
			}
			if !errors.Is(err, errors.ErrUnsupported) {
				return fmt.Errorf("requeue %s to %s: %w", m.ID, queue, err)
			}
		}
		if _, err := dst.Send(ctx, m.Body, opts); err != nil {
			return fmt.Errorf("requeue %s to %s: %w", m.ID, queue, err)
		}
		if err := dead.Delete(ctx, m); err != nil {
			return fmt.Errorf("requeue %s: delete from poison queue: %w", m.ID, err)
		}
		return nil
	})
}

// PurgeDeadLetters deletes up to limit (0 = all) dead letters of tenant's queue and returns
// how many.
func PurgeDeadLetters(ctx context.Context, cfg *config.Config, tenant, queue string, limit int) (int, error) {
	n := 0
	err := withPoison(ctx, cfg, tenant, queue, func(dead listener.Queue) error {
		var err error
		n, err = drain(ctx, dead, limit, func(m *listener.Message) error {
			if err := dead.Delete(ctx, m); err != nil {
				return fmt.Errorf("purge %s: %w", m.ID, err)
			}
			return nil
		})
		return err
	})
	return n, err
}
