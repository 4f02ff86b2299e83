package azure

import (
	"context"
	"time"
)

// probeEvery is how often a queue whose listener backs off after failed calls asks storage
// whether it serves again. A probe is one Get Queue Properties, a billed transaction: at one
// a second an outage costs 3,600 transactions an hour per queue backing off, and a healthy
// queue nothing, since the probe runs only while a listener waits in its error back-off.
// Without it the back-off, doubling per failed round up to its cap, would leave a queue
// standing still for up to a minute after storage came back.
const probeEvery = time.Second

// Recovered returns a channel closed at the next sign that storage serves the queue again:
// an answered probe of its properties. The listener ends its error back-off on it
// (listener/recovery.go). While a channel it handed out is open, one goroutine probes every
// probeEvery; it ends with the first answer, or when the backend closes.
func (q *Queue) Recovered() <-chan struct{} {
	ch := q.recov.Chan()
	if q.probing.CompareAndSwap(false, true) {
		go q.probe()
	}
	return ch
}

func (q *Queue) probe() {
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for range t.C {
		if q.b.closed.Load() {
			q.probing.Store(false)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), probeEvery)
		_, err := q.depth(ctx, true)
		cancel()
		if err == nil {
			// Before the Fire: a Recovered call after it starts a probe of its own.
			q.probing.Store(false)
			q.recov.Fire()
			return
		}
	}
}
