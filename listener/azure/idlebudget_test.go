package azure_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/wqhost/wqhost/internal/clock/clocktest"
	"github.com/wqhost/wqhost/internal/goroutinetest"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/azure"
	"github.com/wqhost/wqhost/listener/pollbudget"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestIdleBudgetAzurite: 1,000 idle listeners on Azurite share idle_calls_per_hour 3600.
// The budget's clock is stepped through a simulated hour, one grant interval (1s) at a time,
// each step waiting until the granted listener's real receive is done and it waits again;
// the listeners' own clocks are real, so a back-off timer of theirs would show up as extra
// calls. The storage transactions counted in that hour must be the budget's within 10%.
// Then a message put on a random queue must be processed within the budget's bound for
// 1,000 queues (simulated). An idle listener holds one goroutine, Run's, waiting for its
// grant.
//
//	go test -race -run IdleBudgetAzurite -v ./listener/azure/
func TestIdleBudgetAzurite(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 Azurite listeners: not in -short")
	}
	const (
		n       = 1000
		perHour = 3600
	)
	srv := server(t)
	be := open(t, srv, azure.EncodingBase64)
	clk := clocktest.New(time.Unix(1_700_000_000, 0))
	budget, err := pollbudget.New(pollbudget.Options{CallsPerHour: perHour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	qs := make([]*azure.Queue, n)
	ls := make([]*listener.Listener, n)
	goroutines0 := runtime.NumGoroutine()
	for i := range n {
		qs[i] = openQueue(t, be, fmt.Sprintf("idlebudget-%04d", i))
		ls[i], _ = run(t, be, qs[i], func(context.Context, *queue.Message) error { return nil },
			func(c *listener.Config) { c.IdlePacer = budget.Queue() })
	}
	transactions := func() (tx, receives uint64) {
		for _, q := range qs {
			s := q.Stats()
			tx, receives = tx+s.Transactions(), receives+s.Receive
		}
		return tx, receives
	}
	// settle waits (real time, bounded) until the budget granted at least grants receives,
	// each grant since grant0 was followed by a receive (since recv0), every listener waits
	// for a grant again and the budget's goroutine sleeps until the next slot.
	settle := func(what string, grants, grant0, recv0 uint64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			_, r := transactions()
			g := budget.Grants()
			if budget.Waiting() == n && clk.Waiters() == 1 && g >= grants && r-recv0 >= g-grant0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: after a minute %d of %d listeners wait, %d grants (want %d), %d receives for %d grants, budget asleep: %v",
					what, budget.Waiting(), n, g, grants, r-recv0, g-grant0, clk.Waiters() == 1)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	settle("start", 0, 0, 0)
	// Each listener's Run goroutine waits for its grant: no worker, no timer of its own.
	// (The other goroutines are the HTTP client's kept-alive connections, two each, opened
	// by the start's burst of receives, and the budget's one.)
	if got := listenerGoroutines(); got != n {
		t.Errorf("%d goroutines in listener code for %d idle listeners, want one each (Run's, waiting for its grant)", got, n)
	}
	t.Logf("goroutines: %d in listener code for %d idle listeners; %d in all since they started",
		listenerGoroutines(), n, runtime.NumGoroutine()-goroutines0)
	tx0, recv0 := transactions()
	grant0 := budget.Grants()

	interval := budget.Interval()
	for i := range int(time.Hour / interval) {
		clk.Advance(interval)
		settle(fmt.Sprintf("step %d", i+1), grant0+uint64(i)+1, grant0, recv0)
	}
	tx1, recv1 := transactions()
	calls, receives := tx1-tx0, recv1-recv0
	t.Logf("idle storage transactions in a simulated hour: %d (%d receives, %d grants) for %d listeners; budget %d",
		calls, receives, budget.Grants()-grant0, n, perHour)
	if lo, hi := uint64(perHour*9/10), uint64(perHour*11/10); calls < lo || calls > hi {
		t.Errorf("%d transactions in the idle hour, want the budget %d within 10%% (%d..%d)", calls, perHour, lo, hi)
	}

	seed := uint64(time.Now().UnixNano())
	pick := rand.New(rand.NewPCG(seed, 0)).IntN(n)
	if _, err := qs[pick].Send(context.Background(), []byte("hello"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := budget.Bound(n)
	sent := clk.Now()
	for ls[pick].State().Processed == 0 {
		if waited := clk.Now().Sub(sent); waited > bound {
			t.Fatalf("queue %d (seed %d): message not processed after %s, beyond the bound %s", pick, seed, waited, bound)
		}
		g := budget.Grants()
		_, r := transactions()
		clk.Advance(interval)
		settle("waiting for the message", g+1, g, r)
	}
	t.Logf("message on queue %d (seed %d) processed %s (simulated) after it was sent; bound for %d queues: %s",
		pick, seed, clk.Now().Sub(sent), n, bound)
}

// listenerGoroutines counts the goroutines running listener code (a Listener's method on
// their stack).
func listenerGoroutines() int { return goroutinetest.Count("wqhost/listener.(*Listener).") }
