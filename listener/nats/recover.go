package nats

import (
	"context"
	"errors"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wqhost/wqhost/listener/queue"
)

// probeEvery is how often a queue whose listener backs off after failed calls asks the
// server whether its consumer is served again. A probe is one consumer info request, which
// the consumer's leader answers: during a quorum loss none does, and the first answer after
// it means a receive would be answered too. JetStream API calls are not billed, so a short
// interval costs the cluster two small requests a second during an outage and nothing
// otherwise.
const probeEvery = 500 * time.Millisecond

// Recovered returns a channel closed at the next sign that the queue is served again: a
// reconnect, a held pull that brought a message, or an answered probe of the consumer. The
// listener ends its error back-off on it (listener/recovery.go). While a channel it handed
// out is open, one goroutine probes every probeEvery; it ends with the first answer, or
// when the backend closes.
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
	for {
		select {
		case <-q.quit:
			q.probing.Store(false)
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), probeEvery)
		_, err := q.cons.Info(ctx)
		cancel()
		if err == nil {
			// Before the Fire: a Recovered call after it starts a probe of its own.
			q.probing.Store(false)
			q.recov.Fire()
			return
		}
	}
}

// transient reports an error that waiting may fix: no server reachable, a request that went
// unanswered (no JetStream meta leader, a stream without its leader), or a cluster still
// forming. An authorization failure, a TLS or config error, a missing stream or JetStream
// turned off are not: waiting changes none of them.
func transient(err error) bool {
	return errors.Is(err, natsgo.ErrNoServers) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, natsgo.ErrTimeout) || errors.Is(err, natsgo.ErrNoResponders) ||
		errors.Is(err, natsgo.ErrConnectionClosed) || clusterForming(err)
}

// unavailable marks err with queue.ErrUnavailable when it is transient.
func unavailable(err error) error {
	if err == nil || !transient(err) {
		return err
	}
	return unavailableError{err}
}

type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, queue.ErrUnavailable} }
