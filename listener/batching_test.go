package listener_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// batchRec is a BatchHandler that records its calls and gives each message the verdict
// decide returns (none when ok is false).
type batchRec struct {
	mu         sync.Mutex
	calls      [][]string // message ids per call
	at         []time.Time
	counts     map[string]int // by body
	decide     func(m *queue.Message, seen int) (v outcome.Outcome, ok bool)
	panicAfter int // > 0: panic after setting this many verdicts
	block      time.Duration
}

func (h *batchRec) Handle(context.Context, *queue.Message) outcome.Outcome {
	panic("a batching listener called Handle")
}

func (h *batchRec) HandleBatch(_ context.Context, ms []*queue.Message, vs []outcome.Outcome) {
	h.mu.Lock()
	if h.counts == nil {
		h.counts = map[string]int{}
	}
	ids := make([]string, len(ms))
	seen := make([]int, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
		h.counts[string(m.Body)]++
		seen[i] = h.counts[string(m.Body)]
	}
	h.calls = append(h.calls, ids)
	h.at = append(h.at, time.Now())
	h.mu.Unlock()
	time.Sleep(h.block)
	for i, m := range ms {
		if h.panicAfter > 0 && i == h.panicAfter {
			panic("guest trapped")
		}
		if h.decide == nil {
			vs[i] = outcome.Outcome{}
			continue
		}
		if v, ok := h.decide(m, seen[i]); ok {
			vs[i] = v
		}
	}
}

func (h *batchRec) sizes() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var n []int
	for _, c := range h.calls {
		n = append(n, len(c))
	}
	return n
}

func (h *batchRec) seen(body string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[body]
}

func sendBodies(t *testing.T, q queue.Queue, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := q.Send(context.Background(), []byte(b), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// The listener gathers messages across receives (at most MaxBatch each) into calls bounded
// by max messages, max bytes and max wait.
func TestBatchBounds(t *testing.T) {
	for _, tt := range []struct {
		name  string
		batch listener.BatchConfig
		send  int           // sent before the listener starts
		drip  time.Duration // then one more every drip, dripN times
		dripN int
		want  []int         // call sizes
		wait  time.Duration // first call's time after start, at least
	}{
		{"max messages splits a backlog", listener.BatchConfig{MaxMessages: 100}, 250, 0, 0, []int{100, 100, 50}, 0},
		{"1000 messages in one call", listener.BatchConfig{MaxMessages: 1000}, 1000, 0, 0, []int{1000}, 0},
		{"max bytes ends a batch", listener.BatchConfig{MaxMessages: 100, MaxBytes: 24}, 20, 0, 0, []int{6, 6, 6, 2}, 0},
		{"max wait flushes a partial batch", listener.BatchConfig{MaxMessages: 100, MaxWait: 5 * time.Second}, 3, 0, 0, []int{3}, 5 * time.Second},
		{"a trickle fills a batch before max wait", listener.BatchConfig{MaxMessages: 4, MaxWait: time.Minute}, 1, time.Second, 3, []int{4}, 3 * time.Second},
		{"max wait 0 takes what is there", listener.BatchConfig{MaxMessages: 100}, 3, 0, 0, []int{3}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.MaxWorkers = 1 // one gatherer: the call sizes are deterministic
				h := &batchRec{}
				cfg.Handler = h
				cfg.Batch = tt.batch
				cfg.HandlerSlots = 1
				sendBodies(t, e.q, numbered("m", tt.send)...) // 4 bytes each
				started := time.Now()
				start(t, cfg)
				for i := range tt.dripN {
					time.Sleep(tt.drip)
					sendBodies(t, e.q, fmt.Sprintf("d%03d", i))
				}
				total := tt.send + tt.dripN
				waitFor(t, 100*time.Millisecond, 10*time.Minute, "every message handled", func() bool {
					n := 0
					for _, s := range h.sizes() {
						n += s
					}
					return n >= total
				})
				synctest.Wait()
				if got := h.sizes(); !slices.Equal(got, tt.want) {
					t.Errorf("call sizes %v, want %v", got, tt.want)
				}
				h.mu.Lock()
				first := h.at[0].Sub(started)
				h.mu.Unlock()
				if first < tt.wait || first > tt.wait+time.Second {
					t.Errorf("first call %s after start, want %s (within a second)", first, tt.wait)
				}
				if d, _ := e.q.Depth(context.Background()); d != 0 {
					t.Errorf("%d messages left, want 0", d)
				}
			})
		})
	}
}

// Each message of a batch settles by its own verdict: ok ones are deleted, retries come
// back after their delay, rejects are dead-lettered with their reasons, and messages given
// no verdict are failures the poison policy retries.
func TestBatchVerdictsSettleEachMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		h := &batchRec{decide: func(m *queue.Message, seen int) (outcome.Outcome, bool) {
			body := string(m.Body)
			switch {
			case seen > 1:
				return outcome.Outcome{}, true
			case strings.HasPrefix(body, "retry"):
				return outcome.RetryAfter(time.Minute, errors.New("later")), true
			case strings.HasPrefix(body, "reject"):
				return outcome.Rejected(errors.New("bad record " + body)), true
			case strings.HasPrefix(body, "none"):
				return outcome.Outcome{}, false
			}
			return outcome.Outcome{}, true
		}}
		cfg.Handler = h
		cfg.Batch = listener.BatchConfig{MaxMessages: 100, MaxWait: time.Second}
		kinds := []string{"ok", "retry", "reject", "none"}
		var bodies []string
		for i := range 20 {
			bodies = append(bodies, fmt.Sprintf("%s-%02d", kinds[i%4], i))
		}
		sendBodies(t, e.q, bodies...)
		l := start(t, cfg)
		waitFor(t, time.Second, time.Hour, "settled", func() bool {
			s := l.State()
			return s.Processed == 15 && s.Poisoned == 5
		})
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := h.sizes(); len(got) == 0 || got[0] != 20 {
			t.Errorf("call sizes %v, want all 20 in the first call", got)
		}
		for _, b := range bodies {
			want := 1
			if strings.HasPrefix(b, "retry") || strings.HasPrefix(b, "none") {
				want = 2
			}
			if got := h.seen(b); got != want {
				t.Errorf("%s handled %d times, want %d", b, got, want)
			}
		}
		dls, err := e.dl.Receive(context.Background(), 32, time.Minute)
		if err != nil || len(dls) != 5 {
			t.Fatalf("dead letters %d (%v), want the 5 rejects", len(dls), err)
		}
		for _, d := range dls {
			if r := d.Attributes[queue.AttrReason]; !strings.HasPrefix(string(d.Body), "reject") || !strings.Contains(r, "bad record "+string(d.Body)) {
				t.Errorf("dead letter %q with reason %q, want a reject with its own reason", d.Body, r)
			}
		}
		if d, _ := e.q.Depth(context.Background()); d != 0 {
			t.Errorf("%d messages left, want 0", d)
		}
	})
}

// A batch call that fails halfway (a guest's trap; here a panic) keeps the verdicts set
// before it: the messages already ok are deleted and not handled again, the rest fail and
// are retried.
func TestBatchFailureHalfwayKeepsVerdicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		h := &batchRec{panicAfter: 5}
		cfg.Handler = h
		cfg.MaxWorkers = 1
		cfg.Batch = listener.BatchConfig{MaxMessages: 10}
		bodies := numbered("m", 10)
		sendBodies(t, e.q, bodies...)
		l := start(t, cfg)
		waitFor(t, time.Second, time.Hour, "the first five processed and five failures", func() bool {
			s := l.State()
			return s.Processed >= 5 && s.Failed >= 5
		})
		h.mu.Lock()
		h.panicAfter = 0
		h.mu.Unlock()
		waitFor(t, time.Second, time.Hour, "all processed", func() bool { return l.State().Processed == 10 })
		for i, b := range bodies {
			want := 1
			if i >= 5 {
				want = 2
			}
			if got := h.seen(b); got != want {
				t.Errorf("%s handled %d times, want %d", b, got, want)
			}
		}
		if s := l.State(); s.Poisoned != 0 {
			t.Errorf("%d poisoned, want 0", s.Poisoned)
		}
	})
}

// Leases are renewed while a batch gathers and while its call runs: a gather and a call
// each lasting many visibility timeouts deliver every message once, even with a second
// listener polling the same queue for lapsed leases.
func TestBatchLeasesRenewedWhileGathering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.VisibilityTimeout = 4 * time.Second
		cfg.MaxWorkers = 1
		h := &batchRec{block: 30 * time.Second}
		cfg.Handler = h
		cfg.Batch = listener.BatchConfig{MaxMessages: 6, MaxWait: time.Minute}
		sendBodies(t, e.q, "d000")
		l := start(t, cfg)
		other := &batchRec{}
		ocfg := baseConfig(e.q, e.dl)
		ocfg.Handler = other
		ocfg.Batch = listener.BatchConfig{MaxMessages: 6}
		ocfg.MinIdle, ocfg.MaxIdle = time.Second, time.Second // polls every second
		time.Sleep(100 * time.Millisecond)                    // the first listener leases d000 first
		o := start(t, ocfg)
		for i := 1; i < 6; i++ {
			time.Sleep(3 * time.Second) // 15 s of gathering: almost four leases' worth
			// Sent to the first listener only: a notify wakes it at once, before the other
			// polls (sends go through the queue both read).
			sendBodies(t, e.q, fmt.Sprintf("d%03d", i))
			l.Notify()
		}
		waitFor(t, time.Second, time.Hour, "all processed", func() bool {
			return l.State().Processed+o.State().Processed == 6
		})
		for i := range 6 {
			b := fmt.Sprintf("d%03d", i)
			if n := h.seen(b) + other.seen(b); n != 1 {
				t.Errorf("%s handled %d times, want once", b, n)
			}
		}
		if s := l.State(); s.LeasesLost != 0 {
			t.Errorf("%d leases lost, want 0", s.LeasesLost)
		}
	})
}

// Shutting down while a batch gathers hands the gathered messages to no handler: they are
// released at once for another host.
func TestBatchShutdownWhileGathering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		h := &batchRec{}
		cfg.Handler = h
		cfg.Batch = listener.BatchConfig{MaxMessages: 100, MaxWait: time.Hour}
		sendBodies(t, e.q, numbered("m", 3)...)
		r := start(t, cfg)
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if n := len(h.sizes()); n != 0 {
			t.Errorf("%d calls while gathering, want 0", n)
		}
		ms, err := e.q.Receive(context.Background(), 32, time.Minute)
		if err != nil || len(ms) != 3 {
			t.Fatalf("received %d messages (%v) right after shutdown, want the 3 released ones", len(ms), err)
		}
	})
}

// Bad batch settings are refused naming the field.
func TestBatchConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		batch   listener.BatchConfig
		handler listener.Handler
		want    string
	}{
		{"too many", listener.BatchConfig{MaxMessages: listener.MaxBatchMessages + 1}, &batchRec{}, "Batch.MaxMessages"},
		{"negative", listener.BatchConfig{MaxMessages: -1}, &batchRec{}, "Batch.MaxMessages"},
		{"negative wait", listener.BatchConfig{MaxMessages: 5, MaxWait: -time.Second}, &batchRec{}, "Batch.MaxWait"},
		{"negative bytes", listener.BatchConfig{MaxMessages: 5, MaxBytes: -1}, &batchRec{}, "Batch.MaxBytes"},
		{"not a batch handler", listener.BatchConfig{MaxMessages: 5}, listener.HandlerFunc(func(context.Context, *queue.Message) error { return nil }), "BatchHandler"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				cfg := baseConfig(e.q, e.dl)
				cfg.Handler = tt.handler
				cfg.Batch = tt.batch
				_, err := listener.New(cfg)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("New: %v, want an error naming %s", err, tt.want)
				}
			})
		})
	}
}

// Under a backlog, batches fill even with many workers: a batching listener runs at most
// one worker more than its handler slots, so first receives do not spend the lease budget
// in small pieces (16 workers of 32 gave calls of 31 messages for max_messages 100).
func TestBatchesFillUnderBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		cfg := baseConfig(e.q, e.dl)
		cfg.Scaler = fixedScaler(16)
		cfg.HandlerSlots = 4
		h := &batchRec{block: time.Millisecond}
		cfg.Handler = h
		cfg.Batch = listener.BatchConfig{MaxMessages: 100}
		sendBodies(t, e.q, numbered("m", 2000)...)
		l := start(t, cfg)
		waitFor(t, 10*time.Millisecond, time.Hour, "all processed", func() bool { return l.State().Processed == 2000 })
		sizes := h.sizes()
		if mean := 2000 / len(sizes); mean < 80 {
			t.Errorf("%d calls for 2000 messages (mean %d, sizes %v), want batches of about 100", len(sizes), mean, sizes)
		}
		if p := l.State().PeakWorkers; p > 5 {
			t.Errorf("peak workers %d, want at most handler slots + 1 = 5", p)
		}
	})
}
