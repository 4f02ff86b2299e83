package listener_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// The tests run inside testing/synctest bubbles: the time package there is a fake clock that
// advances only when every goroutine of the bubble is blocked, so time-driven behaviour
// (back-off, scaling, leases) is deterministic and an idle hour passes in microseconds.

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// memEnv is a memory backend with a work queue and its dead-letter queue. It must be made
// inside the test's bubble.
type memEnv struct {
	be    *memory.Backend
	q, dl *memory.Queue
}

func newMem(t *testing.T) memEnv {
	t.Helper()
	be := memory.New(memory.Options{})
	q, err := be.Queue(context.Background(), "work")
	if err != nil {
		t.Fatal(err)
	}
	dl, err := be.Queue(context.Background(), "work"+queue.PoisonSuffix)
	if err != nil {
		t.Fatal(err)
	}
	return memEnv{be: be, q: q, dl: dl}
}

func (e memEnv) send(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := e.q.Send(context.Background(), []byte{byte(i), byte(i >> 8)}, queue.SendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// seededRand is a concurrency-safe deterministic source for the back-off's jitter.
func seededRand(seed uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, 1))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

// baseConfig is a listener over q with the built-in policies (seeded) and a no-op handler.
func baseConfig(q, dl queue.Queue) listener.Config {
	return listener.Config{
		Queue:      q,
		DeadLetter: dl,
		Handler:    listener.HandlerFunc(func(context.Context, *queue.Message) error { return nil }),
		Backoff:    builtin.NewBackoff(builtin.BackoffOptions{Rand: seededRand(1)}),
		Scaler:     builtin.NewTarget(0),
		Poison:     builtin.NewPoison(builtin.PoisonOptions{BaseDelay: time.Second}),
		Logger:     quiet,
	}
}

// running is a listener started with start; stop cancels it and returns Run's result. It
// holds no goroutine of its own, so that a test can count the listener's.
type running struct {
	*listener.Listener
	cancel context.CancelFunc
	wait   func() error
}

func start(t *testing.T, cfg listener.Config) *running {
	t.Helper()
	l, err := listener.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Listener: l, cancel: cancel, wait: l.Start(ctx)}
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *running) stop() error {
	r.cancel()
	return r.wait()
}

// waitFor advances the fake clock in steps of step until cond holds, failing after limit.
func waitFor(t *testing.T, step, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s (fake clock) waiting for %s", limit, what)
		}
		time.Sleep(step)
	}
}

// calls is the number of billed queue calls a listener made.
func calls(s listener.State) uint64 {
	return s.Receives + s.Deletes + s.Updates + s.Sends + s.DepthQueries
}

// spyQueue wraps a Queue (hiding Batcher and Waiter, so only Notify wakes a listener on
// it), records the time of every call and can fail them on demand.
type spyQueue struct {
	queue.Queue
	mu       sync.Mutex
	receives []time.Time
	all      []time.Time
	failing  atomic.Bool
	// loseDeletes makes the next n Deletes fail with ErrLeaseLost (the message stays).
	loseDeletes atomic.Int32
}

var errUnavailable = errors.New("503 server busy")

func (s *spyQueue) record(receive bool) {
	s.mu.Lock()
	now := time.Now()
	s.all = append(s.all, now)
	if receive {
		s.receives = append(s.receives, now)
	}
	s.mu.Unlock()
}

func (s *spyQueue) times(receivesOnly bool) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if receivesOnly {
		return append([]time.Time(nil), s.receives...)
	}
	return append([]time.Time(nil), s.all...)
}

func (s *spyQueue) Receive(ctx context.Context, n int, vis time.Duration) ([]*queue.Message, error) {
	s.record(true)
	if s.failing.Load() {
		return nil, errUnavailable
	}
	return s.Queue.Receive(ctx, n, vis)
}

func (s *spyQueue) Delete(ctx context.Context, m *queue.Message) error {
	s.record(false)
	if s.failing.Load() {
		return errUnavailable
	}
	if s.loseDeletes.Add(-1) >= 0 {
		return queue.ErrLeaseLost
	}
	return s.Queue.Delete(ctx, m)
}

func (s *spyQueue) UpdateVisibility(ctx context.Context, m *queue.Message, d time.Duration) error {
	s.record(false)
	if s.failing.Load() {
		return errUnavailable
	}
	return s.Queue.UpdateVisibility(ctx, m, d)
}

func (s *spyQueue) Send(ctx context.Context, b []byte, o queue.SendOptions) (string, error) {
	s.record(false)
	if s.failing.Load() {
		return "", errUnavailable
	}
	return s.Queue.Send(ctx, b, o)
}

func (s *spyQueue) Depth(ctx context.Context) (int64, error) {
	s.record(false)
	if s.failing.Load() {
		return 0, errUnavailable
	}
	return s.Queue.Depth(ctx)
}

// fixedScaler always answers n.
type fixedScaler int

func (f fixedScaler) Desired(context.Context, listener.State) int { return int(f) }

// fixedBackoff always answers (d, stop).
type fixedBackoff struct {
	d    time.Duration
	stop bool
}

func (f fixedBackoff) Next(context.Context, listener.IdleState) (time.Duration, bool) {
	return f.d, f.stop
}

// callCount counts a handler's calls per message id.
type callCount struct {
	mu    sync.Mutex
	calls map[string]int
}

// countCalls returns a Handler that counts each call in the returned callCount, then runs h.
func countCalls(h func(context.Context, *queue.Message) error) (*callCount, listener.Handler) {
	c := &callCount{calls: map[string]int{}}
	return c, listener.HandlerFunc(func(ctx context.Context, m *queue.Message) error {
		c.mu.Lock()
		c.calls[m.ID]++
		c.mu.Unlock()
		return h(ctx, m)
	})
}

// checkOnce fails the test for each message handled more than once, and returns how many
// messages were handled.
func (c *callCount) checkOnce(t *testing.T) int {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.calls {
		if n != 1 {
			t.Errorf("message %s handled %d times, want once", id, n)
		}
	}
	return len(c.calls)
}
