package runtime

import (
	"context"
	"errors"
	"math/rand/v2"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlotsWaiterGetsReleasedSlot: a caller waiting for a full pool is handed the next
// released slot (with the instance released with it), and one that gives up loses no slot.
func TestSlotsWaiterGetsReleasedSlot(t *testing.T) {
	s := newSlots(1, new(atomic.Int64))
	if _, err := s.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire on a full pool: err = %v, want deadline exceeded", err)
	}
	got := make(chan *instance)
	go func() {
		inst, err := s.acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- inst
	}()
	for {
		s.mu.Lock()
		n := len(s.waiters)
		s.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	warm := &instance{}
	if !s.release(warm) {
		t.Fatal("release did not keep the warm instance")
	}
	if inst := <-got; inst != warm {
		t.Fatalf("waiter got instance %p, want the released %p", inst, warm)
	}
	s.release(nil)
	if s.free != 1 || len(s.waiters) != 0 {
		t.Fatalf("after all releases: free=%d waiters=%d, want 1 and 0", s.free, len(s.waiters))
	}
}

// TestSlotsNeverOverCommit: many callers with random deadlines never hold more than the
// pool's slots at once, and every slot is back at the end.
func TestSlotsNeverOverCommit(t *testing.T) {
	const size = 3
	s := newSlots(size, new(atomic.Int64))
	var held, peak atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(200))*time.Microsecond)
				_, err := s.acquire(ctx)
				cancel()
				if err != nil {
					continue
				}
				n := held.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(time.Duration(r.IntN(50)) * time.Microsecond)
				held.Add(-1)
				s.release(nil)
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > size {
		t.Errorf("%d slots held at once, pool has %d", p, size)
	}
	if s.free != size || len(s.waiters) != 0 {
		t.Errorf("at the end: free=%d waiters=%d, want %d and 0", s.free, len(s.waiters), size)
	}
}

// TestSlotsParkedInstanceStrandsNoWaiter: callers that wait without a deadline, sharing a
// small pool whose last instance is parked for the next call (the lock-free path), all get
// their turn: a waiter never sleeps beside a parked instance. The pool never holds more
// instances than slots, and at the end every slot is back, parked or free.
func TestSlotsParkedInstanceStrandsNoWaiter(t *testing.T) {
	for _, size := range []int{1, 2, 3} {
		s := newSlots(size, new(atomic.Int64))
		var live, held atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(g), 2))
				for range 2000 {
					inst, err := s.acquire(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					if inst == nil {
						inst = &instance{}
						if n := live.Add(1); n > int64(size) {
							t.Errorf("size %d: %d instances live", size, n)
						}
					}
					if n := held.Add(1); n > int64(size) {
						t.Errorf("size %d: %d slots held at once", size, n)
					}
					if r.IntN(4) == 0 {
						time.Sleep(time.Duration(r.IntN(20)) * time.Microsecond)
					}
					held.Add(-1)
					if !s.release(inst) {
						live.Add(-1)
					}
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			s.mu.Lock()
			t.Fatalf("size %d: callers stuck: %d waiting, %d free, parked %v", size, len(s.waiters), s.free, s.hot.Load() != nil)
		}
		idle, busy, calls := s.counts()
		if busy != 0 || idle != int(live.Load()) || calls != 8*2000 || len(s.waiters) != 0 {
			t.Errorf("size %d at the end: idle=%d busy=%d calls=%d waiters=%d; want idle=%d (live) busy=0 calls=%d waiters=0",
				size, idle, busy, calls, len(s.waiters), live.Load(), 8*2000)
		}
		if got := s.drainIdle(); len(got) != int(live.Load()) || s.free != size {
			t.Errorf("size %d: drained %d instances with %d free slots, want %d and %d", size, len(got), s.free, live.Load(), size)
		}
	}
}

// TestSlotsLastReleaseReachesLateWaiter: the race the parked instance invites, run many
// times: a caller that begins to wait just as the only call parks its instance and leaves
// for good must still get it (nothing else would ever wake it).
func TestSlotsLastReleaseReachesLateWaiter(t *testing.T) {
	s := newSlots(1, new(atomic.Int64))
	r := rand.New(rand.NewPCG(3, 3))
	for round := range 20000 {
		inst, err := s.acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if inst == nil {
			inst = &instance{}
		}
		got := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			inst, err := s.acquire(ctx)
			if err == nil {
				s.release(inst)
			}
			got <- err
		}()
		for range r.IntN(200) {
			goruntime.Gosched()
		}
		s.release(inst)
		if err := <-got; err != nil {
			t.Fatalf("round %d: the late caller was stranded beside the parked instance: %v", round, err)
		}
	}
}

// TestCloseWaitsForCallsInFlight: Close returns only after the call in flight has returned,
// gives up with an error when its context ends first, and later calls fail with
// ErrPoolClosed.
func TestCloseWaitsForCallsInFlight(t *testing.T) {
	e := testEngine(t)
	for _, tc := range []struct {
		name       string
		closeAfter time.Duration // Close's own deadline
		wantErr    bool
	}{
		{name: "waits", closeAfter: time.Minute},
		{name: "gives up", closeAfter: 50 * time.Millisecond, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := guestPool(t, e, "t", PoolConfig{Binding: "b", MinInstances: 1, MaxInstances: 2, Timeout: 2 * time.Second})
			var callDone atomic.Bool
			returned := make(chan error, 1)
			go func() {
				_, err := p.Call(context.Background(), &Input{ID: "slow", Body: []byte("loop")})
				callDone.Store(true)
				returned <- err
			}()
			for p.Stats().Busy == 0 {
				time.Sleep(time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), tc.closeAfter)
			defer cancel()
			err := p.Close(ctx)
			if tc.wantErr {
				if !errors.Is(err, context.DeadlineExceeded) || callDone.Load() {
					t.Fatalf("Close with a %s deadline during a 2s call: err = %v, call done = %v; want deadline exceeded before the call ended", tc.closeAfter, err, callDone.Load())
				}
			} else if st := p.Stats(); err != nil || st.Busy != 0 || st.Instances != 0 {
				// Call gives its slot back just before it returns, so the slot (not the
				// return) is what Close waits for: no call busy, every instance closed.
				t.Fatalf("Close = %v with %d calls busy and %d instances open; want nil after the call ended", err, st.Busy, st.Instances)
			}
			if err := <-returned; !errors.Is(err, ErrTimeout) {
				t.Fatalf("call in flight: %v, want its time limit", err)
			}
			if _, err := p.Call(context.Background(), &Input{ID: "late", Body: []byte("fine")}); !errors.Is(err, ErrPoolClosed) {
				t.Fatalf("call after Close: %v, want ErrPoolClosed", err)
			}
		})
	}
}
