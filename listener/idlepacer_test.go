package listener_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/pollbudget"
	"github.com/wqhost/wqhost/listener/queue"
)

// pacedEnv is n listeners on polling queues (spyQueue hides memory's Waiter, as Azure has
// none) sharing one budget of perHour idle receives. It must be made inside a bubble.
type pacedEnv struct {
	e      memEnv
	budget *pollbudget.Budget
	qs     []*spyQueue
	ls     []*running
}

func newPaced(t *testing.T, n, perHour int, edit func(*listener.Config)) pacedEnv {
	t.Helper()
	b, err := pollbudget.New(pollbudget.Options{CallsPerHour: perHour})
	if err != nil {
		t.Fatal(err)
	}
	p := pacedEnv{e: newMem(t), budget: b}
	for i := range n {
		q, err := p.e.be.Queue(context.Background(), fmt.Sprintf("q%d", i))
		if err != nil {
			t.Fatal(err)
		}
		spy := &spyQueue{Queue: q}
		cfg := baseConfig(spy, p.e.dl)
		cfg.IdlePacer = b.Queue()
		if edit != nil {
			edit(&cfg)
		}
		p.qs = append(p.qs, spy)
		p.ls = append(p.ls, start(t, cfg))
	}
	return p
}

func (p pacedEnv) receives() int {
	n := 0
	for _, q := range p.qs {
		n += len(q.times(true))
	}
	return n
}

// TestIdlePacerSpendsTheBudget: ten idle listeners sharing 60 receives an hour make 60 in
// a simulated hour between them (alone, each would poll up to every 60s: 600 or more),
// every queue is polled within the budget's bound, and an idle listener keeps no worker.
func TestIdlePacerSpendsTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, perHour = 10, 60
		p := newPaced(t, n, perHour, nil)
		synctest.Wait() // each listener's first receive, at start, is not an idle one
		before := p.receives()
		if before != n {
			t.Fatalf("%d receives at start, want one per listener (%d)", before, n)
		}
		start := time.Now()
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := p.receives() - before; got < perHour-1 || got > perHour+1 {
			t.Errorf("%d idle receives in an hour, want the budget's %d ±1", got, perHour)
		}
		for i, l := range p.ls {
			if w := l.State().ActiveWorkers; w != 0 {
				t.Errorf("idle listener %d keeps %d workers, want none (Run's goroutine waits for the grant)", i, w)
			}
		}
		bound := p.budget.Bound(n)
		for i, q := range p.qs {
			last := start
			for _, at := range q.times(true)[1:] {
				if gap := at.Sub(last); gap > bound {
					t.Errorf("queue %d went %s without a receive, beyond the bound %s", i, gap, bound)
				}
				last = at
			}
			if gap := time.Since(last); gap > bound {
				t.Errorf("queue %d: no receive in the last %s, beyond the bound %s", i, gap, bound)
			}
		}
		for _, l := range p.ls {
			if err := l.stop(); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if w := p.budget.Waiting(); w != 0 {
			t.Errorf("%d listeners still waiting in the budget after they stopped", w)
		}
	})
}

// TestIdlePacerBusyIsNotPaced: the paced receive that finds a backlog returns the listener
// to normal operation: the backlog drains at once (a receive per batch, not per grant), and
// costs the budget no grant beyond the one that found it.
func TestIdlePacerBusyIsNotPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, backlog = 3, 200
		p := newPaced(t, n, 60, func(c *listener.Config) { c.BatchSize = 4 })
		synctest.Wait()
		for i := range backlog {
			if _, err := p.qs[1].Send(context.Background(), []byte{byte(i)}, queue.SendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		l := p.ls[1]
		waitFor(t, time.Second, p.budget.Bound(n), "the backlog's first receive", func() bool { return l.State().Processed > 0 })
		grants := p.budget.Grants()
		// 50 receives of 4 at least: paced, that would take 50 minutes.
		waitFor(t, 100*time.Millisecond, time.Minute, "the backlog drained", func() bool { return l.State().Processed == backlog })
		if g := p.budget.Grants() - grants; g > 1 {
			t.Errorf("the budget granted %d receives while the backlog drained, want at most 1 (another queue's)", g)
		}
	})
}

// TestIdlePacerNotifyWakes: a wake-up still reaches a listener waiting for its grant.
func TestIdlePacerNotifyWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPaced(t, 2, 1, nil) // one grant an hour
		time.Sleep(time.Second)     // the first grant, MinInterval after start; the next in an hour
		synctest.Wait()
		if g := p.budget.Grants(); g != 1 {
			t.Fatalf("%d grants in the first second, want 1", g)
		}
		if _, err := p.qs[0].Send(context.Background(), []byte("x"), queue.SendOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := p.ls[0].State().Processed; got != 0 {
			t.Fatalf("processed %d before any grant or wake-up", got)
		}
		p.ls[0].Notify()
		synctest.Wait()
		if got := p.ls[0].State().Processed; got != 1 {
			t.Errorf("processed %d right after Notify, want 1", got)
		}
	})
}
