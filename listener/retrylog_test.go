package listener_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// lockedBuffer is a log sink safe for the listener's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestRetryLogShowsAppliedDelay: a handler asking for a retry after the longest duration
// (retry_after(i64 max): 2562047h47m16s) is retried after the poison policy's max_delay, and
// the log says that delay, not the one asked for; the dead letter's reason gives the cause.
func TestRetryLogShowsAppliedDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		var log lockedBuffer
		cfg := baseConfig(e.q, e.dl)
		cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
		cfg.MaxDequeueCount = 2
		cfg.Poison = builtin.NewPoison(builtin.PoisonOptions{BaseDelay: time.Second, MaxDelay: time.Minute})
		cfg.Handler = listener.HandlerFunc(func(context.Context, *queue.Message) error {
			return outcome.Retry(time.Duration(math.MaxInt64), errors.New("slow down"))
		})
		r := start(t, cfg)
		e.send(t, 1)
		waitFor(t, time.Second, 5*time.Minute, "the message dead-lettered after its retry", func() bool { return r.State().Poisoned == 1 })
		out := log.String()
		if strings.Contains(out, "2562047h") {
			t.Errorf("the log names the delay asked for, not the one applied:\n%s", out)
		}
		if !strings.Contains(out, `msg="message failed; retrying"`) || !strings.Contains(out, "delay=1m0s") || !strings.Contains(out, "err=\"slow down\"") {
			t.Errorf("no retry line with delay=1m0s and the cause:\n%s", out)
		}
		ms, err := e.dl.Peek(context.Background(), 0)
		if err != nil || len(ms) != 1 {
			t.Fatalf("dead letters %v, %v", ms, err)
		}
		if reason := ms[0].Attributes[queue.AttrReason]; strings.Contains(reason, "2562047h") || !strings.Contains(reason, "slow down") {
			t.Errorf("reason %q: want the cause without the delay asked for", reason)
		}
	})
}

// outcomeHandler is a Handler returning one outcome.
type outcomeHandler outcome.Outcome

func (h outcomeHandler) Handle(context.Context, *queue.Message) outcome.Outcome {
	return outcome.Outcome(h)
}

// TestFailureLogsNameTheCause: the listener's lines for a failed message, retried and then
// dead-lettered, carry the failure's cause (cause=timeout) when the handler gave one, and
// none when it did not.
func TestFailureLogsNameTheCause(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    outcome.Outcome
		want string // "": no cause= at all
	}{
		{"timeout", outcome.FailedBy(outcome.CauseTimeout, errors.New("handler exceeded its time limit")), "cause=timeout"},
		{"no cause", outcome.Failed(errors.New("boom")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newMem(t)
				var log lockedBuffer
				cfg := baseConfig(e.q, e.dl)
				cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
				cfg.MaxDequeueCount = 2
				cfg.Poison = builtin.NewPoison(builtin.PoisonOptions{BaseDelay: time.Second, MaxDelay: time.Minute})
				cfg.Handler = outcomeHandler(tc.o)
				r := start(t, cfg)
				e.send(t, 1)
				waitFor(t, time.Second, 5*time.Minute, "the message dead-lettered", func() bool { return r.State().Poisoned == 1 })
				seen := 0
				for _, line := range strings.Split(log.String(), "\n") {
					if !strings.Contains(line, `msg="message failed; retrying"`) && !strings.Contains(line, `msg="message dead-lettered"`) {
						continue
					}
					seen++
					if tc.want == "" && strings.Contains(line, "cause=") || tc.want != "" && !strings.Contains(line, tc.want) {
						t.Errorf("line %q: want %q", line, cmp.Or(tc.want, "no cause"))
					}
				}
				if seen != 2 {
					t.Errorf("%d retry and dead-letter lines, want 2:\n%s", seen, log.String())
				}
			})
		})
	}
}
