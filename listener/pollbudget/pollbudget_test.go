package pollbudget

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
)

var _ listener.IdlePacer = (*Queue)(nil)

// receiveTime is how long a simulated listener's receive takes after its grant, before it
// enrols again (an empty receive on Azure: a few milliseconds).
const receiveTime = 5 * time.Millisecond

// tally is what one simulated listener saw: its grants and its longest wait for one.
type tally struct {
	grants  int
	maxWait time.Duration
}

// simulate runs one simulated listener per queue for d: each enrols, waits for its grant,
// "receives" for receiveTime and enrols again. busy(i) makes queue i find messages at
// start and on every receive (it reports Found before enrolling). It must run inside a
// synctest bubble.
func simulate(t *testing.T, b *Budget, n int, d time.Duration, busy func(i int) bool) []tally {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out := make([]tally, n)
	var wg sync.WaitGroup
	for i := range n {
		q := b.Queue()
		if busy != nil && busy(i) {
			q.Found()
		}
		wg.Go(func() {
			for {
				at := time.Now()
				grant := q.Enrol()
				select {
				case <-ctx.Done():
					q.Withdraw()
					return
				case <-grant:
				}
				q.Withdraw()
				out[i].grants++
				out[i].maxWait = max(out[i].maxWait, time.Since(at))
				time.Sleep(receiveTime)
				if busy != nil && busy(i) {
					q.Found()
				}
			}
		})
	}
	wg.Wait()
	return out
}

func newBudget(t *testing.T, perHour int) *Budget {
	t.Helper()
	b, err := New(Options{CallsPerHour: perHour})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRateAndBound runs idle queues for a simulated hour: the receives granted are the
// budget (to 1%), each queue's longest wait is within Bound, and the queues share the
// grants evenly (least recently polled first: round robin).
func TestRateAndBound(t *testing.T) {
	for _, tc := range []struct {
		queues, perHour int
	}{
		{1000, 3600},
		{10, 3600},
		{10000, 36000},
		{3, 60},
	} {
		t.Run(fmt.Sprintf("%d queues at %d per hour", tc.queues, tc.perHour), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBudget(t, tc.perHour)
				got := simulate(t, b, tc.queues, time.Hour, nil)
				total, lo, hi, worst := 0, got[0].grants, 0, time.Duration(0)
				for _, g := range got {
					total += g.grants
					lo, hi = min(lo, g.grants), max(hi, g.grants)
					worst = max(worst, g.maxWait)
				}
				// ±1: a grant at the window's edge.
				if diff, tol := total-tc.perHour, max(1, tc.perHour/100); diff > tol || -diff > tol {
					t.Errorf("%d receives granted in an hour, want %d ±%d", total, tc.perHour, tol)
				}
				if bound := b.Bound(tc.queues); worst > bound {
					t.Errorf("a queue waited %s for its grant, beyond the bound %s", worst, bound)
				}
				if hi-lo > 1 {
					t.Errorf("grants per queue range from %d to %d: not shared evenly", lo, hi)
				}
				t.Logf("granted %d in an hour; per queue %d..%d; longest wait %s (bound %s)", total, lo, hi, worst, b.Bound(tc.queues))
			})
		})
	}
}

// TestCeilingWithFewQueues: with fewer idle queues than the budget could poll, none is
// polled sooner than MinInterval after its last receive, and the budget is not exceeded.
func TestCeilingWithFewQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, 360_000) // one grant per 10ms
		got := simulate(t, b, 2, time.Minute, nil)
		// Each cycle: MinInterval to eligibility, then up to one Interval to its slot, then
		// the receive.
		perQueue := int(time.Minute / (DefaultMinInterval + receiveTime))
		for i, g := range got {
			if g.grants > perQueue {
				t.Errorf("queue %d granted %d receives in a minute, above %d (MinInterval %s apart)", i, g.grants, perQueue, DefaultMinInterval)
			}
			if g.grants < perQueue*9/10 {
				t.Errorf("queue %d granted %d receives in a minute, want about %d", i, g.grants, perQueue)
			}
		}
	})
}

// TestActiveQueuesFirst: queues that keep finding messages take the activity share (about
// half the budget) while idle ones still get their fair share within Bound.
func TestActiveQueuesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle, active = 200, 20
		b := newBudget(t, 3600)
		got := simulate(t, b, idle+active, time.Hour, func(i int) bool { return i >= idle })
		var idleGrants, activeGrants int
		worstIdle := time.Duration(0)
		for i, g := range got {
			if i < idle {
				idleGrants += g.grants
				worstIdle = max(worstIdle, g.maxWait)
			} else {
				activeGrants += g.grants
			}
		}
		// The activity share is every other grant; in a fair share alone the 20 queues
		// would have 20/220 of them.
		if total := idleGrants + activeGrants; activeGrants < total/2 {
			t.Errorf("active queues granted %d of %d receives, want half at least", activeGrants, total)
		}
		perActive, perIdle := float64(activeGrants)/active, float64(idleGrants)/idle
		if perActive < 5*perIdle {
			t.Errorf("an active queue was polled %.1f times an hour, an idle one %.1f: no priority", perActive, perIdle)
		}
		if bound := b.Bound(idle + active); worstIdle > bound {
			t.Errorf("an idle queue waited %s, beyond the bound %s", worstIdle, bound)
		}
		t.Logf("active queues: %.1f receives each; idle: %.1f; longest idle wait %s (bound %s)", perActive, perIdle, worstIdle, b.Bound(idle+active))
	})
}

// TestBackOffAfterActivity: a queue that found messages once, among many idle queues, is
// polled again about MinInterval later, then at doubling intervals, and soon no more often
// than the idle ones.
func TestBackOffAfterActivity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, 36000) // one grant per 100ms
		done := make(chan struct{})
		go func() {
			defer close(done)
			simulate(t, b, 100, time.Minute, nil)
		}()
		q := b.Queue()
		q.Found()
		start := time.Now()
		var polls []time.Duration
		for time.Since(start) < time.Minute {
			grant := q.Enrol()
			<-grant
			q.Withdraw()
			polls = append(polls, time.Since(start))
			time.Sleep(receiveTime)
		}
		<-done
		if polls[0] > DefaultMinInterval+b.Interval() {
			t.Errorf("first poll after activity at %s, want within %s", polls[0], DefaultMinInterval+b.Interval())
		}
		// Doubling: each poll twice as long after the activity as the last (to within the
		// grant slots), until the round robin of the fair share (101 queues, 10.1s) comes
		// first.
		for k := 1; k < len(polls) && polls[k-1] < 5*time.Second; k++ {
			if lo, hi := 2*polls[k-1], 2*polls[k-1]+2*b.Interval(); polls[k] < lo || polls[k] > hi {
				t.Errorf("poll %d at %s, want %s..%s (doubling from the previous one)", k, polls[k], lo, hi)
			}
		}
		for k := 1; k < len(polls); k++ {
			if gap := polls[k] - polls[k-1]; gap > b.Bound(101) {
				t.Errorf("poll %d came %s after the previous one, beyond the bound %s", k, gap, b.Bound(101))
			}
		}
		// 600 grants in the minute shared by 101 queues: about 6 each by fair share; the
		// activity share adds the doubling polls, about log2(60s/100ms) ≈ 10.
		if len(polls) > 6+12 {
			t.Errorf("%d polls in a minute after activity, want about 6 + 10", len(polls))
		}
		t.Logf("polls after activity at %v", polls)
	})
}

// TestWithdrawReleases: withdrawn queues leave the line, a grant not taken is dropped (not a
// free receive later), and the granting goroutine ends when no queue waits and restarts on
// the next enrolment.
func TestWithdrawReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, 3600)
		qs := []*Queue{b.Queue(), b.Queue(), b.Queue()}
		defer func() { // on failure: end the granting goroutine before the bubble ends
			for _, q := range qs {
				q.Withdraw()
			}
		}()
		for _, q := range qs {
			q.Enrol()
		}
		time.Sleep(500 * time.Millisecond) // one grant at MinInterval, to qs[0], left untaken
		synctest.Wait()
		if n := b.Waiting(); n != 2 {
			t.Fatalf("%d queues waiting after one grant, want 2", n)
		}
		for _, q := range qs {
			q.Withdraw()
		}
		synctest.Wait()
		if n := b.Waiting(); n != 0 {
			t.Fatalf("%d queues waiting after every withdrawal", n)
		}
		b.mu.Lock()
		running := b.running
		b.mu.Unlock()
		if running {
			t.Fatal("the granting goroutine still runs with no queue waiting")
		}
		grant := qs[0].Enrol()
		select {
		case <-grant:
			t.Fatal("the grant dropped by Withdraw was delivered to the next enrolment")
		default:
		}
		time.Sleep(b.Bound(1))
		select {
		case <-grant:
		default:
			t.Fatalf("no grant within %s after the goroutine restarted", b.Bound(1))
		}
		qs[0].Withdraw()
	})
}

func TestNewOptions(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{}, "CallsPerHour 0 is outside 1..36000000"},
		{Options{CallsPerHour: MaxCallsPerHour + 1}, "CallsPerHour 36000001 is outside"},
		{Options{CallsPerHour: 1, MinInterval: -time.Second}, "MinInterval -1s is negative"},
	} {
		if _, err := New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.o, err, tc.want)
		}
	}
	b, err := New(Options{CallsPerHour: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if b.Interval() != time.Second || b.Bound(1000) != DefaultMinInterval+2000*time.Second {
		t.Errorf("3600 calls an hour: interval %s, bound for 1000 queues %s; want 1s and 33m20.1s", b.Interval(), b.Bound(1000))
	}
}
