package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

func failure(count, maxDequeue int, err error) listener.Failure {
	return listener.Failure{Message: &queue.Message{ID: "m1", Queue: "orders", DequeueCount: count}, Outcome: outcome.Failed(err), MaxDequeueCount: maxDequeue}
}

// Every failure of a message is retried with a growing delay until its dequeue count reaches
// max_dequeue_count, and that very failure dead-letters it.
func TestPoisonExactlyAtMaxDequeueCount(t *testing.T) {
	ctx := context.Background()
	p := NewPoison(PoisonOptions{Jitter: -1}) // the count rule; TestPoisonJitter the delays
	boom := errors.New("boom: invalid order 42")
	for _, limit := range []int{1, 2, 3, 5, 8, 20} {
		var prev time.Duration
		for count := 1; count <= limit; count++ {
			d := p.Decide(ctx, failure(count, limit, boom))
			if count < limit {
				if d.Kind != outcome.KindRetry {
					t.Fatalf("max %d: failure %d got %v, want retry", limit, count, d.Kind)
				}
				if d.After <= 0 || d.After < prev || d.After > DefaultPoisonMaxDelay {
					t.Fatalf("max %d: failure %d retry delay %v (previous %v)", limit, count, d.After, prev)
				}
				prev = d.After
				continue
			}
			if d.Kind != outcome.KindReject {
				t.Fatalf("max %d: failure %d got %v, want dead-letter", limit, count, d.Kind)
			}
			want := fmt.Sprintf("failed %d times (max_dequeue_count %d): %s", limit, limit, boom)
			if d.Reason() != want {
				t.Fatalf("max %d: reason %q, want %q", limit, d.Reason(), want)
			}
		}
	}
}

func TestPoisonDecisions(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	s := time.Second
	// The formula without the jitter (TestPoisonJitter covers it).
	noJitter := PoisonOptions{Jitter: -1}
	custom := PoisonOptions{BaseDelay: s, MaxDelay: 10 * s, Factor: 3, Jitter: -1}
	tests := []struct {
		name string
		o    PoisonOptions
		f    listener.Failure
		want outcome.Outcome
	}{
		{"first failure", noJitter, failure(1, 5, boom), outcome.Outcome{Kind: outcome.KindRetry, After: s}},
		{"second", noJitter, failure(2, 5, boom), outcome.Outcome{Kind: outcome.KindRetry, After: 2 * s}},
		{"fourth", noJitter, failure(4, 5, boom), outcome.Outcome{Kind: outcome.KindRetry, After: 8 * s}},
		{"fifth: poison", noJitter, failure(5, 5, boom), outcome.DeadLetter("failed 5 times (max_dequeue_count 5): boom")},
		{"past the limit (limit lowered)", noJitter, failure(9, 5, boom), outcome.DeadLetter("failed 9 times (max_dequeue_count 5): boom")},
		{"limit 0 means 5: fourth", noJitter, failure(4, 0, boom), outcome.Outcome{Kind: outcome.KindRetry, After: 8 * s}},
		{"limit 0 means 5: fifth", noJitter, failure(5, 0, boom), outcome.DeadLetter("failed 5 times (max_dequeue_count 5): boom")},
		{"negative limit means 5", noJitter, failure(5, -3, boom), outcome.DeadLetter("failed 5 times (max_dequeue_count 5): boom")},
		{"reject: dead-letter now", noJitter, listener.Failure{Message: &queue.Message{DequeueCount: 1}, Outcome: outcome.Outcome{Kind: outcome.KindReject, Err: outcome.Reject(boom)}, MaxDequeueCount: 5}, outcome.DeadLetter("rejected: boom")},
		{"reject without error", noJitter, listener.Failure{Outcome: outcome.Outcome{Kind: outcome.KindReject}}, outcome.DeadLetter("rejected")},
		{"retry-after honoured", noJitter, listener.Failure{Message: &queue.Message{DequeueCount: 2}, Outcome: outcome.Outcome{Kind: outcome.KindRetry, After: 3 * s, Err: boom}, MaxDequeueCount: 5}, outcome.Outcome{Kind: outcome.KindRetry, After: 3 * s}},
		{"retry-after capped", noJitter, listener.Failure{Message: &queue.Message{DequeueCount: 2}, Outcome: outcome.Outcome{Kind: outcome.KindRetry, After: 100 * time.Hour, Err: boom}, MaxDequeueCount: 5}, outcome.Outcome{Kind: outcome.KindRetry, After: DefaultPoisonMaxDelay}},
		{"retry-after does not outlive the limit", noJitter, listener.Failure{Message: &queue.Message{DequeueCount: 5}, Outcome: outcome.Outcome{Kind: outcome.KindRetry, After: s, Err: boom}, MaxDequeueCount: 5}, outcome.DeadLetter("failed 5 times (max_dequeue_count 5): boom")},
		{"negative retry-after ignored", noJitter, listener.Failure{Message: &queue.Message{DequeueCount: 1}, Outcome: outcome.Outcome{Kind: outcome.KindRetry, After: -s, Err: boom}, MaxDequeueCount: 5}, outcome.Outcome{Kind: outcome.KindRetry, After: s}},
		{"nil message counts as first", noJitter, listener.Failure{Outcome: outcome.Failed(boom), MaxDequeueCount: 5}, outcome.Outcome{Kind: outcome.KindRetry, After: s}},
		{"zero dequeue count counts as first", noJitter, failure(0, 5, boom), outcome.Outcome{Kind: outcome.KindRetry, After: s}},
		{"custom 1", custom, failure(1, 10, boom), outcome.Outcome{Kind: outcome.KindRetry, After: s}},
		{"custom 2", custom, failure(2, 10, boom), outcome.Outcome{Kind: outcome.KindRetry, After: 3 * s}},
		{"custom 3", custom, failure(3, 10, boom), outcome.Outcome{Kind: outcome.KindRetry, After: 9 * s}},
		{"custom 4 capped", custom, failure(4, 10, boom), outcome.Outcome{Kind: outcome.KindRetry, After: 10 * s}},
		{"huge count saturates", noJitter, failure(100000, math.MaxInt, boom), outcome.Outcome{Kind: outcome.KindRetry, After: DefaultPoisonMaxDelay}},
		{"constant factor", PoisonOptions{BaseDelay: 2 * s, Factor: 1, Jitter: -1}, failure(7, 10, boom), outcome.Outcome{Kind: outcome.KindRetry, After: 2 * s}},
		{"factor below 1 is the default", PoisonOptions{BaseDelay: s, Factor: 0.5, Jitter: -1}, failure(3, 10, boom), outcome.Outcome{Kind: outcome.KindRetry, After: 4 * s}},
		{"max below base is raised", PoisonOptions{BaseDelay: 8 * s, MaxDelay: s, Jitter: -1}, failure(3, 10, boom), outcome.Outcome{Kind: outcome.KindRetry, After: 8 * s}},
	}
	for _, tt := range tests {
		if got := NewPoison(tt.o).Decide(ctx, tt.f); got.Kind != tt.want.Kind || got.After != tt.want.After || got.Reason() != tt.want.Reason() {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestPoisonValidate(t *testing.T) {
	tests := []struct {
		o   PoisonOptions
		err string
	}{
		{PoisonOptions{}, ""},
		{PoisonOptions{BaseDelay: time.Second, MaxDelay: time.Minute, Factor: 1.5}, ""},
		{PoisonOptions{BaseDelay: -time.Second}, "base_delay -1s is negative"},
		{PoisonOptions{MaxDelay: -time.Second}, "max_delay -1s is negative"},
		{PoisonOptions{MaxDelay: 500 * time.Millisecond}, "max_delay 500ms is below base_delay 1s"},
		{PoisonOptions{Factor: 0.5}, "factor 0.5 must be at least 1"},
		{PoisonOptions{Factor: math.NaN()}, "factor NaN must be at least 1"},
		{PoisonOptions{Factor: math.Inf(1)}, "factor +Inf must be at least 1"},
	}
	for _, tt := range tests {
		got := errText(tt.o.Validate())
		if tt.err == "" && got != "" || !strings.Contains(got, tt.err) {
			t.Errorf("%+v.Validate() = %q, want %q", tt.o, got, tt.err)
		}
	}
}

// TestPoisonJitter: messages that failed together (1000 of them, one batch) are retried
// spread over ±10 % of the delay instead of all at once; a delay at max_delay spreads below
// it, never past; one message's delay is reproducible; Jitter < 0 turns it off, and a
// handler's own retry-after is never spread.
func TestPoisonJitter(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	p := NewPoison(PoisonOptions{})
	for _, tc := range []struct {
		count    int
		lo, hi   time.Duration
		nominal  time.Duration
		atTheCap bool
	}{
		{1, 900 * time.Millisecond, 1100 * time.Millisecond, time.Second, false},
		{3, 3600 * time.Millisecond, 4400 * time.Millisecond, 4 * time.Second, false},
		{20, 54 * time.Second, 60 * time.Second, 60 * time.Second, true},
	} {
		seen := map[time.Duration]bool{}
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for i := range 1000 {
			f := listener.Failure{Message: &queue.Message{ID: fmt.Sprintf("msg-%d", i), DequeueCount: tc.count}, Outcome: outcome.Failed(boom), MaxDequeueCount: 100}
			d := p.Decide(ctx, f).After
			if d < tc.lo || d > tc.hi {
				t.Fatalf("failure %d of %s: delay %v outside [%v, %v]", tc.count, f.Message.ID, d, tc.lo, tc.hi)
			}
			if again := p.Decide(ctx, f).After; again != d {
				t.Fatalf("failure %d of %s: delay %v, then %v for the same failure", tc.count, f.Message.ID, d, again)
			}
			seen[d] = true
			lo, hi = min(lo, d), max(hi, d)
		}
		// Spread over the band: no lockstep, and no pile-up on the cap.
		band := tc.hi - tc.lo
		if len(seen) < 900 || hi-lo < band*8/10 {
			t.Errorf("failure %d: 1000 messages got %d distinct delays spanning %v; want them spread over %v", tc.count, len(seen), hi-lo, band)
		}
	}
	off := NewPoison(PoisonOptions{Jitter: -1})
	if d := off.Decide(ctx, failure(3, 5, boom)).After; d != 4*time.Second {
		t.Errorf("Jitter -1: delay %v, want exactly 4s", d)
	}
	own := listener.Failure{Message: &queue.Message{ID: "m", DequeueCount: 2}, Outcome: outcome.RetryAfter(3*time.Second, boom), MaxDequeueCount: 5}
	if d := p.Decide(ctx, own).After; d != 3*time.Second {
		t.Errorf("a handler's retry-after of 3s became %v; want it as asked", d)
	}
}
