package suite

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wqhost/wqhost/bench/internal/consumer"
	"github.com/wqhost/wqhost/bench/internal/countq"
	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
)

// IdleRow is the queue calls one consumer made while its queue stayed empty.
type IdleRow struct {
	Backend  Backend         `json:"backend"`
	Consumer string          `json:"consumer"`
	Workers  int             `json:"workers"`
	Seconds  float64         `json:"seconds"`
	Calls    countq.Snapshot `json:"queue_calls"`
	// PerHour extrapolates the window's billed calls (transactions) to an hour.
	PerHour float64 `json:"transactions_per_hour"`
}

// IdleOptions configure MeasureIdle.
type IdleOptions struct {
	Backend Backend
	// Window is how long the empty queue is watched, after the burst; default 60s.
	Window time.Duration
	// Workers is the listener's max workers and the naive loop's goroutines; default 4.
	Workers int
	// Burst is the number of messages handled before the idle window, so the listener has
	// scaled up and must scale down again; default 200.
	Burst int
}

type idleCase struct {
	label string
	kind  consumer.Kind
	push  bool
}

// MeasureIdle runs every consumer at once, each on its own queue of the backend: a burst of
// messages, then Window of silence during which it counts their queue calls.
func MeasureIdle(ctx context.Context, stores *Stores, o IdleOptions) ([]IdleRow, error) {
	if o.Window <= 0 {
		o.Window = time.Minute
	}
	if o.Workers < 1 {
		o.Workers = 4
	}
	if o.Burst < 1 {
		o.Burst = 200
	}
	cases := []idleCase{
		{"wqhost listener (polling, back-off)", consumer.Listener, false},
		{"naive loop (receive 1, 100 ms sleep)", consumer.Naive, false},
		{"fixed 1 s poller", consumer.Poller, false},
	}
	if o.Backend != Azurite {
		cases = append([]idleCase{{"wqhost listener (push wake-ups)", consumer.Listener, true}}, cases...)
	}
	rows := make([]IdleRow, len(cases))
	errs := make([]error, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() { rows[i], errs[i] = idleOne(ctx, stores, o, c) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

func idleOne(ctx context.Context, stores *Stores, o IdleOptions, c idleCase) (IdleRow, error) {
	row := IdleRow{Backend: o.Backend, Consumer: c.label, Workers: o.Workers}
	st, err := stores.Open(ctx, o.Backend)
	if err != nil {
		return row, err
	}
	defer st.Close()
	if err := Preload(ctx, st.Queue, Bodies("noop", o.Burst, 64), nil); err != nil {
		return row, err
	}
	var counts countq.Counts
	q := countq.WrapPolling(st.Queue, &counts)
	if c.push {
		q = countq.Wrap(st.Queue, &counts)
	}
	var handled atomic.Int64
	burstDone := make(chan struct{})
	h := listener.HandlerFunc(func(context.Context, *queue.Message) error {
		if handled.Add(1) == int64(o.Burst) {
			close(burstDone)
		}
		return nil
	})
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() {
		errc <- consumer.Run(runCtx, c.kind, consumer.Options{
			Queue: q, DeadLetter: st.DeadLetter, Handler: h, Workers: o.Workers, Push: c.push,
		})
	}()
	select {
	case <-burstDone:
	case err := <-errc:
		return row, fmt.Errorf("idle %s: consumer stopped: %v", c.label, err)
	case <-time.After(2 * time.Minute):
		return row, fmt.Errorf("idle %s: burst of %d not handled in 2 minutes (%d done)", c.label, o.Burst, handled.Load())
	}
	// Let the burst's last deletes land before the window opens.
	time.Sleep(200 * time.Millisecond)
	before, t0 := counts.Snapshot(), time.Now()
	select {
	case <-time.After(o.Window):
	case <-ctx.Done():
		return row, ctx.Err()
	}
	row.Calls, row.Seconds = counts.Snapshot().Sub(before), time.Since(t0).Seconds()
	row.PerHour = float64(row.Calls.Transactions) / row.Seconds * 3600
	stop()
	return row, <-errc
}
