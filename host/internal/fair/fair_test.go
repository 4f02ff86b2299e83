package fair

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fairSim drives a Scheduler deterministically: every busy tenant always has more work
// than it can run (each finished call is followed by a new request), and the oldest call in
// flight finishes first.
type fairSim struct {
	s       *Scheduler
	shares  map[string]*Share
	holders []*Share    // calls in flight, oldest first
	pending []simWaiter // queued requests, in arrival order
}

type simWaiter struct {
	t *Share
	w *waiter
}

func (f *fairSim) request(t *Share) {
	if w := t.request(); w != nil {
		f.pending = append(f.pending, simWaiter{t, w})
		return
	}
	f.holders = append(f.holders, t)
}

// collect moves granted waiters to the holders.
func (f *fairSim) collect() {
	kept := f.pending[:0]
	for _, p := range f.pending {
		select {
		case <-p.w.ready:
			f.holders = append(f.holders, p.t)
		default:
			kept = append(kept, p)
		}
	}
	f.pending = kept
}

// step finishes the oldest call; its tenant asks again at once if busy.
func (f *fairSim) step(busy map[string]bool) {
	t := f.holders[0]
	f.holders = f.holders[1:]
	t.Release()
	f.collect()
	if busy[t.name] {
		f.request(t)
		f.collect()
	}
}

func TestFairSchedulerShares(t *testing.T) {
	type tenantSpec struct {
		name           string
		weight, cap    int
		busy           bool
		initialRequest int // requests made before the run (an idle tenant makes none)
	}
	cases := []struct {
		name    string
		total   int
		tenants []tenantSpec
		want    map[string]int // calls in flight in the steady state
	}{
		{"weights 1:1 share evenly", 4,
			[]tenantSpec{{"a", 1, 0, true, 8}, {"b", 1, 0, true, 8}},
			map[string]int{"a": 2, "b": 2}},
		{"weights 3:1 share 3:1", 4,
			[]tenantSpec{{"a", 3, 0, true, 8}, {"b", 1, 0, true, 8}},
			map[string]int{"a": 3, "b": 1}},
		{"a capped tenant leaves the rest to the other", 4,
			[]tenantSpec{{"a", 3, 1, true, 8}, {"b", 1, 0, true, 8}},
			map[string]int{"a": 1, "b": 3}},
		{"an idle tenant's share goes to the busy one", 4,
			[]tenantSpec{{"idle", 3, 0, false, 0}, {"b", 1, 0, true, 8}},
			map[string]int{"idle": 0, "b": 4}},
		{"the first arrival's head start is corrected", 6,
			[]tenantSpec{{"a", 1, 0, true, 12}, {"b", 1, 0, true, 12}, {"c", 1, 0, true, 12}},
			map[string]int{"a": 2, "b": 2, "c": 2}},
		{"no budget: only caps", 0,
			[]tenantSpec{{"a", 1, 2, true, 8}, {"b", 5, 3, true, 8}},
			map[string]int{"a": 2, "b": 3}},
		{"a light tenant is not starved by a heavy one", 2,
			[]tenantSpec{{"heavy", 1000, 0, true, 8}, {"light", 1, 0, true, 8}},
			map[string]int{"heavy": 1, "light": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fairSim{s: New(tc.total), shares: map[string]*Share{}}
			busy := map[string]bool{}
			for _, ts := range tc.tenants {
				f.shares[ts.name] = f.s.tenant(ts.name, ts.weight, ts.cap)
				busy[ts.name] = ts.busy
			}
			// The first tenant asks for everything before the others arrive.
			for _, ts := range tc.tenants {
				for range ts.initialRequest {
					f.request(f.shares[ts.name])
				}
			}
			for range 200 { // warm-up: the first tenant's head start drains
				f.step(busy)
			}
			for i := range 500 {
				f.step(busy)
				for _, ts := range tc.tenants {
					sh := f.shares[ts.name]
					if ts.cap > 0 && int(sh.held.Load()) > ts.cap {
						t.Fatalf("step %d: %s runs %d calls above its cap %d", i, ts.name, sh.held.Load(), ts.cap)
					}
				}
				if tc.total > 0 && int(f.s.held.Load()) > tc.total {
					t.Fatalf("step %d: %d calls above the budget %d", i, f.s.held.Load(), tc.total)
				}
				// After each finished call is replaced the running set is back to the steady
				// state (the freed slot went to whoever was furthest below its share).
				for name, want := range tc.want {
					if got := int(f.shares[name].held.Load()); got != want {
						t.Fatalf("step %d: %s runs %d calls; want %d (all: %v)", i, name, got, want, f.running())
					}
				}
			}
		})
	}
}

func (f *fairSim) running() map[string]int64 {
	out := map[string]int64{}
	for n, s := range f.shares {
		out[n] = s.held.Load()
	}
	return out
}

func TestFairSchedulerNoStarvationAtEqualRatios(t *testing.T) {
	// Budget 1, three tenants always busy: the slot must rotate, not stick to the tenant
	// registered first (every tenant is at ratio 0 when the slot frees).
	f := &fairSim{s: New(1), shares: map[string]*Share{}}
	busy := map[string]bool{"a": true, "b": true, "c": true}
	for _, n := range []string{"a", "b", "c"} {
		f.shares[n] = f.s.tenant(n, 1, 0)
	}
	for _, n := range []string{"a", "b", "c"} {
		f.request(f.shares[n])
	}
	served := map[string]int{}
	for range 300 {
		served[f.holders[0].name]++
		f.step(busy)
	}
	for _, n := range []string{"a", "b", "c"} {
		if served[n] != 100 {
			t.Fatalf("served %v; want 100 each", served)
		}
	}
}

func TestFairShareAcquireCancelled(t *testing.T) {
	s := New(1)
	a, b := s.tenant("a", 1, 0), s.tenant("b", 1, 0)
	if err := a.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := b.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire over a full budget = %v; want the context's error", err)
	}
	// The cancelled waiter is gone: the freed slot is not lost to it.
	a.Release()
	if err := b.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.held.Load() != 1 || b.held.Load() != 1 || a.held.Load() != 0 {
		t.Fatalf("held host=%d a=%d b=%d; want 1, 0, 1", s.held.Load(), a.held.Load(), b.held.Load())
	}
	b.Release()
	if s.held.Load() != 0 {
		t.Fatalf("host held %d after every release", s.held.Load())
	}
}

func TestFairShareBlocksAtCapWithoutHoldingBudget(t *testing.T) {
	s := New(2)
	a, b := s.tenant("a", 1, 1), s.tenant("b", 1, 0)
	if err := a.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Acquire(context.Background()) }() // waits at a's cap
	// b still gets the second slot of the budget.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Acquire(ctx); err != nil {
		t.Fatalf("b blocked behind a capped tenant: %v", err)
	}
	b.Release()
	a.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a.peak.Load() != 1 {
		t.Fatalf("a peaked at %d calls; cap 1", a.peak.Load())
	}
	a.Release()
}

// Within a tenant, a binding whose calls run to their time limit cannot keep more than its
// weighted share of the tenant's slots while the others have work: it starts holding every
// slot (it was first), and as its slow calls end, the freed slots go to the bindings below
// their share, while their own fast calls keep coming back to them.
func TestFairBindingsShareTenantSlots(t *testing.T) {
	type spec struct {
		name   string
		weight int
		slow   bool
	}
	tests := []struct {
		name     string
		cap      int
		bindings []spec
		want     map[string]int // slots held at the end; the slow one never above its share
	}{{
		name: "one spinner, two healthy, equal weights",
		cap:  6,
		bindings: []spec{
			{"spin", 1, true}, {"h1", 1, false}, {"h2", 1, false},
		},
		want: map[string]int{"spin": 2, "h1": 2, "h2": 2},
	}, {
		name: "five spinners next to one healthy binding",
		cap:  12,
		bindings: []spec{
			{"s1", 1, true}, {"s2", 1, true}, {"s3", 1, true}, {"s4", 1, true}, {"s5", 1, true}, {"h", 1, false},
		},
		want: map[string]int{"s1": 2, "s2": 2, "s3": 2, "s4": 2, "s5": 2, "h": 2},
	}, {
		name: "weights",
		cap:  6,
		bindings: []spec{
			{"spin", 1, true}, {"h", 2, false},
		},
		want: map[string]int{"spin": 2, "h": 4},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(0)
			tn := s.tenant("a", 1, tt.cap)
			byName := map[string]*Binding{}
			var pending []*waiter
			var owner []*Binding // of pending
			var slow, fast []*Binding
			// calls in flight per binding, oldest first, as a simple queue of owners
			var slowCalls, fastCalls []*Binding
			take := func(b *Binding, isSlow bool) {
				if isSlow {
					slowCalls = append(slowCalls, b)
				} else {
					fastCalls = append(fastCalls, b)
				}
			}
			isSlow := map[*Binding]bool{}
			request := func(b *Binding) {
				if w := b.request(); w != nil {
					pending, owner = append(pending, w), append(owner, b)
					return
				}
				take(b, isSlow[b])
			}
			collect := func() {
				kp, ko := pending[:0], owner[:0]
				for i, w := range pending {
					select {
					case <-w.ready:
						take(owner[i], isSlow[owner[i]])
					default:
						kp, ko = append(kp, w), append(ko, owner[i])
					}
				}
				pending, owner = kp, ko
			}
			for _, sp := range tt.bindings {
				b := tn.Binding(sp.name, sp.weight)
				byName[sp.name] = b
				isSlow[b] = sp.slow
				if sp.slow {
					slow = append(slow, b)
				} else {
					fast = append(fast, b)
				}
			}
			// The spinners come first and take every slot, with more leased behind.
			for i := range tt.cap {
				request(slow[i%len(slow)])
			}
			for _, b := range slow {
				request(b)
			}
			for _, b := range fast {
				for range tt.cap {
					request(b)
				}
			}
			share := func(b *Binding) int {
				total := 0
				for _, sp := range tt.bindings {
					total += sp.weight
				}
				return (tt.cap*b.weight + total - 1) / total
			}
			// Every step: the fast calls in flight end (and their bindings ask again);
			// every third step the oldest slow call reaches its time limit.
			for step := range 300 {
				n := len(fastCalls)
				for range n {
					b := fastCalls[0]
					fastCalls = fastCalls[1:]
					b.Release()
					collect()
					request(b)
					collect()
				}
				if step%3 == 0 && len(slowCalls) > 0 {
					b := slowCalls[0]
					slowCalls = slowCalls[1:]
					b.Release()
					collect()
					request(b)
					collect()
				}
				if step >= 3*tt.cap { // every first slow call has ended
					for _, b := range slow {
						if b.inUse > share(b) {
							t.Fatalf("step %d: %s holds %d slots, above its share %d", step, b.name, b.inUse, share(b))
						}
					}
				}
			}
			for name, want := range tt.want {
				if got := byName[name].inUse; got != want {
					t.Errorf("%s holds %d slots at the end, want %d", name, got, want)
				}
			}
		})
	}
}
