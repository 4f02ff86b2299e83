package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// delivery is one message delivered by a pull, with its metadata parsed.
type delivery struct {
	msg      *natsgo.Msg
	seq      uint64    // stream sequence
	received uint64    // NumDelivered
	at       time.Time // when it was stored
	// releases are the deliveries of a group message released unstarted (released.go),
	// releasesRev their key's revision; releasesRead says they were read.
	releases     int
	releasesRev  uint64
	releasesRead bool
}

// Headers returns the message's headers.
func (d delivery) Headers() natsgo.Header { return d.msg.Header }

// Reply returns the delivery's ack subject.
func (d delivery) Reply() string { return d.msg.Reply }

// newDelivery parses the metadata of a delivered message (its ack subject).
func newDelivery(m *natsgo.Msg) (delivery, error) {
	md, err := m.Metadata()
	if err != nil {
		return delivery{}, err
	}
	return delivery{msg: m, seq: md.Sequence.Stream, received: md.NumDelivered, at: md.Timestamp}, nil
}

// fromJS turns a message of the client's Fetch into a delivery.
func fromJS(m jetstream.Msg) (delivery, error) {
	md, err := m.Metadata()
	if err != nil {
		return delivery{}, err
	}
	return delivery{msg: &natsgo.Msg{Subject: m.Subject(), Reply: m.Reply(), Header: m.Headers(), Data: m.Data()},
		seq: md.Sequence.Stream, received: md.NumDelivered, at: md.Timestamp}, nil
}

// How long a pull waits for the server's answer beyond its expiry: answerWait normally,
// answerWaitFailing after a pull that went unanswered (a message the server delivers into a
// pull given up on stays leased until its AckWait, then comes back).
const (
	answerWait        = 5 * time.Second
	answerWaitFailing = time.Second
)

// fetch asks the consumer for up to n messages with one no-wait pull request: the server
// answers with the messages it has and then a status, at once when it has none — or, with
// expires > 0, after waiting up to expires for the first (JetStream's no_wait with expires,
// which the client's FetchNoWait cannot ask for).
func (q *Queue) fetch(ctx context.Context, n int, expires time.Duration) ([]delivery, error) {
	return q.fetchFrom(ctx, q.b.opts.Consumer, n, expires)
}

// fetchFrom is fetch from the named consumer of the queue's stream.
func (q *Queue) fetchFrom(ctx context.Context, consumer string, n int, expires time.Duration) ([]delivery, error) {
	nc := q.b.nc
	inbox := nc.NewInbox()
	// A channel sized for the answer (n messages and a status, with room to spare) rather
	// than SubscribeSync's 64k-slot one, which costs half a megabyte a pull.
	ch := make(chan *natsgo.Msg, n+8)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer sub.Unsubscribe()
	req := struct {
		Batch   int   `json:"batch"`
		NoWait  bool  `json:"no_wait"`
		Expires int64 `json:"expires,omitempty"`
	}{n, true, expires.Nanoseconds()}
	body, _ := json.Marshal(req)
	subj := fmt.Sprintf("$JS.API.CONSUMER.MSG.NEXT.%s.%s", q.streamName, consumer)
	if err := nc.PublishRequest(subj, inbox, body); err != nil {
		return nil, err
	}
	// A healthy server answers a no-wait pull at once. After a pull that went unanswered
	// (a hung node, no consumer leader) the next waits less for its answer: a receive in
	// flight when the cluster serves again would otherwise hold the binding for the rest of
	// its wait (work resumed 4.6 s after a quorum loss ended by SIGCONT).
	answer := answerWait
	if q.unanswered.Load() {
		answer = answerWaitFailing
	}
	ctx, cancel := context.WithTimeout(ctx, expires+answer)
	defer cancel()
	var out []delivery
	for len(out) < n {
		var m *natsgo.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && len(out) > 0 {
				return out, nil
			}
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				q.unanswered.Store(true)
			}
			return out, fmt.Errorf("pull: %w", ctx.Err())
		}
		q.unanswered.Store(false)
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch code := m.Header.Get("Status"); code {
			case "404", "408", "409":
				if code == "409" && len(out) == 0 {
					return nil, fmt.Errorf("pull: %s %s", code, m.Header.Get("Description"))
				}
				return out, nil
			case "100": // heartbeat
				continue
			default:
				return out, fmt.Errorf("pull: status %s %s", code, m.Header.Get("Description"))
			}
		}
		d, err := newDelivery(m)
		if err != nil {
			q.b.log.Error("nats: delivery without metadata; given back", "queue", q.name, "err", err)
			_ = q.ack(m.Reply, ackNak)
			continue
		}
		out = append(out, d)
	}
	return out, nil
}
