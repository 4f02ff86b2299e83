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
	silent := 0 // probes in a row whose server answered no ping either
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
		silent = q.checkServer(silent)
	}
}

// hungAfter is how many probes in a row may find the connected server answering no ping
// before the connection moves to another server.
const hungAfter = 2

// pingWait is how long a probe waits for the connected server's pong.
const pingWait = time.Second

// checkServer tells a hung server from a cluster without quorum, after a probe went
// unanswered: a server without quorum still answers a ping, a hung one (SIGSTOP, a paused
// VM, a full disk stalling it) answers nothing while its connection stays open. The
// client's own pings notice that only after PingInterval × (MaxPingsOutstanding+1), 4-6 s,
// while the other servers could serve all along; so after hungAfter silent probes in a row
// the connection moves to another server at once (ForceReconnect). silent is the count so
// far; it returns the new one.
func (q *Queue) checkServer(silent int) int {
	nc := q.b.nc
	if !nc.IsConnected() || len(nc.Servers()) < 2 {
		return 0 // reconnecting already, or nowhere else to go
	}
	if err := nc.FlushTimeout(pingWait); err == nil || !errors.Is(err, natsgo.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return 0
	}
	if silent++; silent < hungAfter {
		return silent
	}
	q.b.log.Warn("nats: the connected server answers no ping; moving to another", "server", nc.ConnectedUrlRedacted(), "queue", q.name)
	if err := nc.ForceReconnect(); err != nil {
		q.b.log.Warn("nats: reconnect to another server", "err", err)
	}
	return 0
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
