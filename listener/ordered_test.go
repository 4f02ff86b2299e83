package listener_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// orderedEvent is one handler call, in real time.
type orderedEvent struct {
	id         string
	group      int
	start, end time.Time
	outcome    string // ok, retry or reject
}

// TestOrderedGroupsNeverOverlap runs ordered bindings over the real SQLite store with
// random handler durations, retries and dead letters, groups sent out of order, with and
// without push: from the recorded start and end times, no call of group N+1 starts before
// every call of group N ended, every message is settled exactly once, and messages of one
// group do run at the same time.
func TestOrderedGroupsNeverOverlap(t *testing.T) {
	const (
		runs      = 16
		groups    = 5
		perGroup  = 6
		maxHandle = 4 * time.Millisecond
	)
	peakOverall := 0
	for run := range runs {
		t.Run(fmt.Sprintf("run%02d", run), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(run), 7))
			ctx := context.Background()
			be, err := local.Open(ctx, filepath.Join(t.TempDir(), "q.db"), local.Options{Sync: local.SyncNormal, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			q, err := be.Queue(ctx, "work")
			if err != nil {
				t.Fatal(err)
			}
			dl, err := be.Queue(ctx, "work"+queue.PoisonSuffix)
			if err != nil {
				t.Fatal(err)
			}
			// Every message's fate is drawn up front: most succeed, some are retried once,
			// some are rejected (dead-lettered).
			type plan struct {
				group  int
				dur    time.Duration
				fate   string
				called int
			}
			plans := map[string]*plan{}
			var order []int
			for g := range groups {
				for range perGroup {
					order = append(order, (g+1)*100) // order numbers like seed 003's 100, 200...
				}
			}
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, g := range order {
				p := &plan{group: g, dur: time.Duration(rng.Int64N(int64(maxHandle))), fate: "ok"}
				switch r := rng.IntN(10); {
				case r == 0:
					p.fate = "reject"
				case r <= 2:
					p.fate = "retry"
				}
				id, err := q.Send(ctx, []byte("m"), queue.SendOptions{Attributes: map[string]string{queue.AttrOrderKey: strconv.Itoa(g)}})
				if err != nil {
					t.Fatal(err)
				}
				plans[id] = p
			}
			var (
				mu            sync.Mutex
				events        []orderedEvent
				inFlight, pk  int
				settledOnce   = map[string]int{}
				allSettled    = make(chan struct{})
				settledClosed bool
			)
			settle := func(id string) {
				settledOnce[id]++
				if len(settledOnce) == len(plans) && !settledClosed {
					settledClosed = true
					close(allSettled)
				}
			}
			handler := listener.HandlerFunc(func(ctx context.Context, m *queue.Message) error {
				mu.Lock()
				p := plans[m.ID]
				p.called++
				call := p.called
				inFlight++
				pk = max(pk, inFlight)
				mu.Unlock()
				start := time.Now()
				time.Sleep(p.dur)
				end := time.Now()
				fate := p.fate
				if fate == "retry" && call > 1 {
					fate = "ok"
				}
				mu.Lock()
				inFlight--
				events = append(events, orderedEvent{id: m.ID, group: p.group, start: start, end: end, outcome: fate})
				if fate != "retry" {
					settle(m.ID)
				}
				mu.Unlock()
				switch fate {
				case "retry":
					return outcome.Retry(time.Duration(rng2(m.ID))*time.Millisecond, errors.New("try again"))
				case "reject":
					return outcome.Reject(errors.New("bad message"))
				}
				return nil
			})
			cfg := baseConfig(q, dl)
			cfg.Ordered = true
			cfg.Handler = handler
			cfg.MinIdle, cfg.MaxIdle = 5*time.Millisecond, 50*time.Millisecond
			cfg.MaxWorkers, cfg.BatchSize, cfg.Concurrency = 4, 4, 4 // a group spans batches and workers
			if run%2 == 1 {
				cfg.Push, cfg.MinWorkers = true, 0
			}
			r := start(t, cfg)
			select {
			case <-allSettled:
			case <-time.After(30 * time.Second):
				mu.Lock()
				var left []string
				for id, p := range plans {
					if settledOnce[id] == 0 {
						left = append(left, fmt.Sprintf("%s(group %d, %s, %d calls)", id, p.group, p.fate, p.called))
					}
				}
				n := len(settledOnce)
				mu.Unlock()
				t.Fatalf("only %d of %d messages settled after 30s (push=%v): the gate stalled; left %v", n, len(plans), cfg.Push, left)
			}
			// The store is empty once the last deletes land.
			deadline := time.Now().Add(10 * time.Second)
			for {
				n, err := q.Depth(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d messages left in the queue", n)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			lastEnd := map[int]time.Time{}
			firstStart := map[int]time.Time{}
			for _, e := range events {
				if e.end.After(lastEnd[e.group]) {
					lastEnd[e.group] = e.end
				}
				if f, ok := firstStart[e.group]; !ok || e.start.Before(f) {
					firstStart[e.group] = e.start
				}
			}
			for g := 200; g <= groups*100; g += 100 {
				if !firstStart[g].After(lastEnd[g-100]) {
					t.Errorf("group %d started at %s, before group %d's last call ended at %s",
						g, firstStart[g].Format("15:04:05.000000"), g-100, lastEnd[g-100].Format("15:04:05.000000"))
				}
			}
			for id, n := range settledOnce {
				if n != 1 {
					t.Errorf("message %s settled %d times", id, n)
				}
			}
			rejected := 0
			for _, p := range plans {
				if p.fate == "reject" {
					rejected++
				}
			}
			if d, err := dl.Depth(ctx); err != nil || int(d) != rejected {
				t.Errorf("dead letters %d (%v); want %d", d, err, rejected)
			}
			peakOverall = max(peakOverall, pk)
		})
	}
	if peakOverall < 2 {
		t.Fatalf("messages of one group never ran at the same time (peak %d)", peakOverall)
	}
}

// rng2 is a retry delay of 1..20ms derived from the id (the handler runs concurrently, so
// it cannot share the run's generator).
func rng2(id string) int {
	n, _ := strconv.Atoi(id)
	return 1 + n%20
}

func TestOrderedNeedsAnOrderedReceiver(t *testing.T) {
	be := memory.New(memory.Options{})
	q, err := be.Queue(context.Background(), "work")
	if err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(q, q)
	cfg.Ordered = true
	if _, err := listener.New(cfg); err == nil || !strings.Contains(err.Error(), `"work"`) {
		t.Fatalf("ordered mode over a queue without ordered receive: %v, want an error naming it", err)
	}
}
