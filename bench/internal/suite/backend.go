package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/azure/azuritetest"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

// Backend names a queue store.
type Backend string

// The backends a workload can run on.
const (
	Memory  Backend = "memory"
	Local   Backend = "local"   // durable SQLite (synchronous FULL), a fresh file per run
	Azurite Backend = "azurite" // Azure Queue Storage emulator, started on demand
)

// Backends lists every backend.
var Backends = []Backend{Memory, Local, Azurite}

// Stores opens fresh queues on each backend. Each Azurite queue gets its own emulator,
// started on demand, unless AzureConnectionString points at a running service.
type Stores struct {
	// Dir holds the local backend's database files.
	Dir string
	// Repo is the wqhost checkout, where tools/azurite lives.
	Repo string
	// AzureConnectionString, if set, is used instead of starting Azurite.
	AzureConnectionString string

	mu  sync.Mutex
	seq atomic.Int64
}

// Close releases the stores; every Opened is closed on its own.
func (s *Stores) Close() error { return nil }

// azureConn returns the connection string for one run and a function that releases it.
// Without AzureConnectionString every run gets a fresh Azurite: one long-lived emulator was
// seen to slow down and leave requests unanswered after many runs, which would make later
// rows measure the emulator's state rather than the consumer.
func (s *Stores) azureConn(ctx context.Context) (string, func() error, error) {
	if s.AzureConnectionString != "" {
		return s.AzureConnectionString, func() error { return nil }, nil
	}
	s.mu.Lock()
	if os.Getenv("WQHOST_AZURITE_DIR") == "" {
		// azuritetest looks beside the nearest go.mod, which from bench/ is this module's.
		os.Setenv("WQHOST_AZURITE_DIR", filepath.Join(s.Repo, "tools", "azurite"))
	}
	s.mu.Unlock()
	srv, err := azuritetest.StartServer(ctx, azuritetest.Options{InMemory: true})
	if err != nil {
		return "", nil, fmt.Errorf("azurite: %w (%s)", err, azuritetest.InstallHint)
	}
	return srv.ConnectionString(), srv.Close, nil
}

// Opened is a work queue and its dead-letter queue on a fresh store or fresh names.
type Opened struct {
	Queue, DeadLetter queue.Queue
	close             func() error
}

// Close releases the store.
func (o *Opened) Close() error { return o.close() }

// Open returns an empty queue (and its -poison queue) on backend b.
func (s *Stores) Open(ctx context.Context, b Backend) (*Opened, error) {
	n := s.seq.Add(1)
	name := fmt.Sprintf("bench-%d", n)
	var be queue.Backend
	switch b {
	case Memory:
		be = memory.New(memory.Options{})
	case Local:
		if err := os.MkdirAll(s.Dir, 0o755); err != nil {
			return nil, err
		}
		path := filepath.Join(s.Dir, fmt.Sprintf("run-%d-%d.db", os.Getpid(), n))
		lb, err := local.Open(ctx, path, local.Options{})
		if err != nil {
			return nil, err
		}
		be = closer{lb, func() { os.Remove(path); os.Remove(path + "-wal"); os.Remove(path + "-shm") }}
	case Azurite:
		conn, stop, err := s.azureConn(ctx)
		if err != nil {
			return nil, err
		}
		ab, err := azure.Open(ctx, azure.Options{ConnectionString: conn, CreateQueues: true})
		if err != nil {
			stop()
			return nil, err
		}
		be = closer{ab, func() { _ = stop() }}
	default:
		return nil, fmt.Errorf("backend %q: unknown (want one of %v)", b, Backends)
	}
	q, err := be.Open(ctx, name)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("backend %s: open %s: %w", b, name, err)
	}
	dl, err := be.Open(ctx, name+queue.PoisonSuffix)
	if err != nil {
		be.Close()
		return nil, fmt.Errorf("backend %s: open %s: %w", b, name+queue.PoisonSuffix, err)
	}
	return &Opened{Queue: q, DeadLetter: dl, close: be.Close}, nil
}

// closer runs cleanup after closing a backend.
type closer struct {
	queue.Backend
	after func()
}

func (c closer) Close() error {
	err := c.Backend.Close()
	c.after()
	return err
}

// batchSender is implemented by backends that enqueue many messages in one transaction.
type batchSender interface {
	SendBatch(ctx context.Context, bodies [][]byte, opts queue.SendOptions) ([]string, error)
}

// Preload enqueues bodies, in batches where the backend can, else from 16 goroutines.
func Preload(ctx context.Context, q queue.Queue, bodies [][]byte, progress func(int)) error {
	if bs, ok := q.(batchSender); ok {
		for i := 0; i < len(bodies); i += 512 {
			chunk := bodies[i:min(i+512, len(bodies))]
			if _, err := bs.SendBatch(ctx, chunk, queue.SendOptions{}); err != nil {
				return fmt.Errorf("preload %s: %w", q.Name(), err)
			}
			if progress != nil {
				progress(len(chunk))
			}
		}
		return nil
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, 16)
	)
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) {
					return
				}
				if _, err := q.Send(ctx, bodies[i], queue.SendOptions{}); err != nil {
					errs <- fmt.Errorf("preload %s message %d: %w", q.Name(), i, err)
					return
				}
				if progress != nil {
					progress(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
