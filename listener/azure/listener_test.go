package azure_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/azure/azuritetest"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// fill sends n messages with bodies "0".."n-1" from 16 goroutines.
func fill(tb testing.TB, q queue.Queue, n int) {
	tb.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := q.Send(context.Background(), []byte(strconv.FormatInt(i, 10)), queue.SendOptions{}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		tb.Fatalf("fill %s: %v", q.Name(), err)
	}
}

// seen records which bodies a handler processed and how often.
type seen struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *seen) add(body []byte) {
	s.mu.Lock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[string(body)]++
	s.mu.Unlock()
}

func (s *seen) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.n)
}

// missing returns the bodies "0".."n-1" not processed.
func (s *seen) missing(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i := range n {
		if s.n[strconv.Itoa(i)] == 0 {
			out = append(out, strconv.Itoa(i))
		}
	}
	return out
}

// run starts a listener on q (dead letters to <q>-poison) and returns a stop function that
// ends it and returns Run's error (the same each time).
func run(tb testing.TB, b *azure.Backend, q queue.Queue, h listener.HandlerFunc, mod func(*listener.Config)) (*listener.Listener, func() error) {
	tb.Helper()
	dl := openQueue(tb, b, q.Name()+queue.PoisonSuffix)
	cfg := listener.Config{
		Queue: q, DeadLetter: dl, Handler: h,
		Backoff: builtin.NewBackoff(builtin.BackoffOptions{MinIdle: 50 * time.Millisecond, MaxIdle: 500 * time.Millisecond}),
		Scaler:  builtin.NewTarget(0),
		Poison:  builtin.NewPoison(builtin.PoisonOptions{}),
		MinIdle: 50 * time.Millisecond, MaxIdle: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if mod != nil {
		mod(&cfg)
	}
	l, err := listener.New(cfg)
	if err != nil {
		tb.Fatalf("listener.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := l.Start(ctx) // no goroutine of the test's: idle-cost tests count the listener's
	stop := func() error {
		cancel()
		return wait()
	}
	tb.Cleanup(func() { _ = stop() })
	return l, stop
}

// eventually polls cond every 20ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitState polls the listener's state every 20ms until cond holds, failing with the last
// state after d.
func waitState(t *testing.T, l *listener.Listener, d time.Duration, what string, cond func(listener.State) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for st := l.State(); !cond(st); st = l.State() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; listener state %+v", d, what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tbWriter sends log lines to the test's log, shown on failure or with -v.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestListenerDrainsAzure(t *testing.T) {
	s := server(t)
	// Azurite's deletes scan its message collection, so a drain costs it O(n²): a thousand
	// messages keep this test to seconds on a busy machine; 3000 took a minute under -race.
	const n = 1000
	// Production retry settings: a loaded emulator may take seconds per request.
	b := open(t, s, azure.EncodingBase64, func(o *azure.Options) { o.Retry = azure.RetryOptions{} })
	q := openQueue(t, b, "drain")
	fill(t, q, n)
	before := q.Stats()
	var got seen
	l, stop := run(t, b, q, func(_ context.Context, m *queue.Message) error {
		got.add(m.Body)
		return nil
	}, nil)
	waitState(t, l, 2*time.Minute, "the drain", func(st listener.State) bool { return st.Processed >= n })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if miss := got.missing(n); len(miss) != 0 {
		t.Fatalf("%d messages never handled (first %s)", len(miss), miss[0])
	}
	st := l.State()
	if d, err := q.Depth(context.Background()); err != nil || d != 0 {
		t.Fatalf("Depth after the drain = %d, %v; want 0", d, err)
	}
	after := q.Stats()
	if del := after.Delete - before.Delete; del != n {
		t.Fatalf("%d deletes for %d messages", del, n)
	}
	tx := after.Transactions() - before.Transactions()
	t.Logf("drained %d: peak workers %d, receives %d (%d empty), storage transactions %d (%.3f per message)",
		n, st.PeakWorkers, st.Receives, st.EmptyReceives, tx, float64(tx)/n)
	if st.PeakWorkers < 2 {
		t.Errorf("peak workers %d: the listener did not scale out on a %d-message backlog", st.PeakWorkers, n)
	}
}

func TestListenerRenewsLeaseOfSlowMessage(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64)
	q := openQueue(t, b, "slow")
	id, err := q.Send(ctx, []byte("slow"), queue.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const lease = 10 * time.Second
	started := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	l, stop := run(t, b, q, func(_ context.Context, m *queue.Message) error {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-release
		return nil
	}, func(c *listener.Config) { c.VisibilityTimeout = lease })
	// Registered after run's cleanup, so it runs first: a failing test releases the
	// handler and its listener stops instead of hanging the package.
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	<-started
	// A competing consumer polls for 2 lease lengths: a lapsed lease would hand it the
	// message. The lease is long enough that a slow Azurite on a loaded machine still renews
	// in time: 2 s was not, and 6 s lost the lease once when the emulator took seconds per
	// request beside the whole -race suite.
	other := openQueue(t, open(t, s, azure.EncodingBase64), "slow")
	for end := time.Now().Add(lease * 2); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		ms, err := other.Receive(ctx, 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 0 {
			t.Fatalf("message %s reappeared while its handler was still running (lease not renewed)", ms[0].ID)
		}
	}
	unblock()
	waitState(t, l, 10*time.Second, "the slow message to be settled", func(st listener.State) bool { return st.Processed == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Update < 2 {
		t.Fatalf("%d visibility updates in %s with a %s lease, want renewals", st.Update, lease*2, lease)
	}
	if c := calls.Load(); c != 1 {
		t.Fatalf("handler called %d times for %s, want 1", c, id)
	}
	if d, err := q.Depth(ctx); err != nil || d != 0 {
		t.Fatalf("Depth = %d, %v after settling; want 0", d, err)
	}
}

func TestListenerPoisonsFailingMessage(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	b := open(t, s, azure.EncodingBase64)
	q := openQueue(t, b, "failing")
	id, err := q.Send(ctx, []byte(`{"order":7}`), queue.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	l, stop := run(t, b, q, func(_ context.Context, m *queue.Message) error {
		calls.Add(1)
		return errors.New("payment service said no")
	}, func(c *listener.Config) {
		c.MaxDequeueCount = 3
		// Azure counts visibility in seconds: retry after 1 s each time.
		c.Poison = builtin.NewPoison(builtin.PoisonOptions{BaseDelay: time.Second, Factor: 1})
		c.HandlerVersion = func() string { return "sha256:feedface" }
	})
	waitState(t, l, 30*time.Second, "the dead letter", func(st listener.State) bool { return st.Poisoned == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := calls.Load(); c != 3 {
		t.Fatalf("handler called %d times, want max_dequeue_count = 3", c)
	}
	pq := openQueue(t, b, "failing-poison")
	pm := receiveN(t, pq, 1, time.Minute)[0]
	if string(pm.Body) != `{"order":7}` {
		t.Fatalf("poison body %q", pm.Body)
	}
	checkDeadLetterAttrs(t, pm.Attributes, map[string]string{
		queue.AttrOriginalID:     id,
		queue.AttrOriginalQueue:  "failing",
		queue.AttrDequeueCount:   "3",
		queue.AttrHandlerVersion: "sha256:feedface",
	}, "failed 3 times")
	if r := pm.Attributes[queue.AttrReason]; !strings.Contains(r, "payment service said no") {
		t.Fatalf("reason %q lacks the handler's error", r)
	}
	if d, err := q.Depth(ctx); err != nil || d != 0 {
		t.Fatalf("source Depth = %d, %v; want 0", d, err)
	}
}

// TestListenerRidesOutOutage stops Azurite in the middle of a drain. The listener must back
// off (storage attempts over the outage stay bounded: one prober, doubling delays, no hot
// loop) and finish once storage is back, every message handled and the queue empty.
func TestListenerRidesOutOutage(t *testing.T) {
	server(t)
	s := azuritetest.Start(t)
	ctx := context.Background()
	const n = 300
	b := open(t, s, azure.EncodingBase64, func(o *azure.Options) {
		o.Retry = azure.RetryOptions{MaxRetries: 1, RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond, TryTimeout: 2 * time.Second}
	})
	q := openQueue(t, b, "outage-drain")
	fill(t, q, n)
	var got seen
	l, stop := run(t, b, q, func(_ context.Context, m *queue.Message) error {
		time.Sleep(10 * time.Millisecond) // a handler doing some I/O, so the drain spans the outage
		got.add(m.Body)
		return nil
	}, func(c *listener.Config) {
		c.VisibilityTimeout = 2 * time.Second // leases lost to the outage come back quickly
		c.MaxWorkers = 4
		c.ErrorBackoffMax = time.Second
	})
	eventually(t, 30*time.Second, "the drain to start", func() bool { return got.distinct() >= 30 })
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	attempts := func() uint64 {
		var sum uint64
		for _, st := range b.Stats() {
			sum += st.Transactions() + st.Unanswered
		}
		return sum
	}
	// In-flight calls finish failing first (their settles and renewals fail too, which on a
	// loaded machine takes longer than any fixed pause); then measure a steady 4 s of outage.
	eventually(t, 30*time.Second, "the calls in flight at the outage to end", func() bool {
		st := l.State()
		return st.InFlight == 0 && st.Leased == 0
	})
	time.Sleep(500 * time.Millisecond)
	a0, e0 := attempts(), l.State().Errors
	const outage = 4 * time.Second
	time.Sleep(outage)
	a1, e1 := attempts(), l.State().Errors
	// Error back-off doubles from MinIdle (50ms) to ErrorBackoffMax (1s): about 7 probes in
	// 4 s, each 2 attempts (MaxRetries 1), plus the odd depth query. A hot loop would make
	// thousands.
	if a1-a0 > 40 {
		t.Fatalf("%d storage attempts (%d listener errors) during a %s outage, want a bounded back-off (<= 40)", a1-a0, e1-e0, outage)
	}
	if a1 == a0 {
		t.Fatalf("no storage attempts during the outage: the listener stopped probing")
	}
	t.Logf("outage of %s: %d storage attempts, %d listener errors", outage, a1-a0, e1-e0)
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "every message handled after the restart", func() bool { return got.distinct() == n })
	eventually(t, 30*time.Second, "the queue to empty", func() bool {
		d, err := q.Depth(ctx)
		return err == nil && d == 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if miss := got.missing(n); len(miss) != 0 {
		t.Fatalf("lost %d messages", len(miss))
	}
	st := l.State()
	t.Logf("after restart: processed %d (%d distinct bodies handled), leases lost %d, errors %d", st.Processed, n, st.LeasesLost, st.Errors)
	// Messages whose delete failed in the outage were handled again after it; they must not
	// have been counted as processed twice. (Fewer is possible: a delete storage applied
	// just before it stopped, whose answer was lost.)
	if st.Processed > n {
		t.Fatalf("Processed = %d for %d messages: failed deletes were counted as processed", st.Processed, n)
	}
}
