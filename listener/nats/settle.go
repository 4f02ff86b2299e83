package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wqhost/wqhost/listener/queue"
)

// errNotConfirmed is a settlement the server did not answer within ackTry.
var errNotConfirmed = errors.New("not confirmed by the server")

// DeleteBatch acks the messages, each confirmed by the server (double ack), and returns one
// error per message. The acks go out together with replies to one inbox of the batch and the
// confirmations are collected there, so a batch costs one message per ack and one wait, not
// a request (a goroutine, a timer, a response channel) per message. An ack left unconfirmed
// is sent again while its lease lasts, as Delete does (ackLease).
func (q *Queue) DeleteBatch(ctx context.Context, ms []*queue.Message) []error {
	errs := make([]error, len(ms))
	ls := make([]*lease, len(ms))
	live := make([]int, 0, len(ms))
	for i, m := range ms {
		l, err := q.leaseOf(m, true)
		if err != nil {
			errs[i] = err
			continue
		}
		ls[i] = l
		live = append(live, i)
	}
	for _, i := range q.ackLeases(ctx, ls, live, ackAck, errs) {
		q.restore(ms[i].ID, ls[i])
		errs[i] = fmt.Errorf("nats: ack %s in %s: %w", ms[i].ID, q.name, errs[i])
	}
	for _, i := range live {
		if errs[i] == nil {
			q.forgetReleases(ctx, ls[i])
		}
	}
	return errs
}

// ackLeases sends cmd for the leases ls[i], i in idx, until the server confirms each,
// sending the unconfirmed again every ackRetryWait while their leases last and ctx allows
// (ackLease's rule). It sets errs[i] for each one left unconfirmed and returns their indices.
func (q *Queue) ackLeases(ctx context.Context, ls []*lease, idx []int, cmd []byte, errs []error) (failed []int) {
	for len(idx) > 0 {
		idx = q.ackRound(ctx, ls, idx, cmd, errs)
		retry := idx[:0:0]
		for _, i := range idx {
			if ctx.Err() == nil && time.Now().Add(ackRetryWait).Before(ls[i].until) {
				retry = append(retry, i)
			} else {
				failed = append(failed, i)
			}
		}
		if len(retry) == 0 {
			break
		}
		q.b.log.Debug("nats: settlements not confirmed; retrying", "queue", q.name, "count", len(retry), "err", errs[retry[0]])
		select {
		case <-ctx.Done():
			for _, i := range retry {
				errs[i] = fmt.Errorf("%w (then %w)", errs[i], ctx.Err())
			}
			return append(failed, retry...)
		case <-time.After(ackRetryWait):
		}
		idx = retry
	}
	return failed
}

// ackRound sends cmd once for each ls[i], i in idx, with the reply subject <inbox>.<i>, and
// waits up to ackTry for the answers. It returns the indices not confirmed, with errs[i]
// saying why; errs[i] is nil for the confirmed.
func (q *Queue) ackRound(ctx context.Context, ls []*lease, idx []int, cmd []byte, errs []error) (unconfirmed []int) {
	fail := func(err error) []int {
		for _, i := range idx {
			errs[i] = err
		}
		return idx
	}
	nc := q.b.nc
	inbox := nc.NewInbox()
	// Room for every answer: a full channel would drop one (a slow consumer).
	ch := make(chan *natsgo.Msg, len(idx))
	sub, err := nc.ChanSubscribe(inbox+".*", ch)
	if err != nil {
		return fail(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // the inbox is this round's alone
	state := make(map[int]error, len(idx))
	for _, i := range idx {
		errs[i] = nil
		if ls[i].reply == "" {
			errs[i] = fmt.Errorf("nats: %s: delivery without an ack subject", q.name)
			continue
		}
		if err := nc.PublishRequest(ls[i].reply, inbox+"."+strconv.Itoa(i), cmd); err != nil {
			errs[i] = err
			continue
		}
		state[i] = errNotConfirmed
	}
	waiting := len(state)
	if waiting > 0 {
		timer := time.NewTimer(ackTry)
		defer timer.Stop()
	wait:
		for waiting > 0 {
			select {
			case m := <-ch:
				i, err := strconv.Atoi(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:])
				if prev, ok := state[i]; err != nil || !ok || prev != errNotConfirmed {
					continue // not this round's, or a second answer
				}
				state[i] = answerErr(m)
				waiting--
			case <-timer.C:
				break wait
			case <-ctx.Done():
				for i, err := range state {
					if err == errNotConfirmed {
						state[i] = ctx.Err()
					}
				}
				break wait
			}
		}
	}
	for _, i := range idx {
		if errs[i] == nil {
			errs[i] = state[i]
		}
		if errs[i] != nil {
			unconfirmed = append(unconfirmed, i)
		}
	}
	return unconfirmed
}

// answerErr is the error an answer to an ack command carries: nil for the server's
// confirmation (an empty message), ErrNoResponders when no consumer leader listened on the
// ack subject (a failover), or the status the answer holds.
func answerErr(m *natsgo.Msg) error {
	if len(m.Data) > 0 || m.Header == nil {
		return nil
	}
	switch code := m.Header.Get("Status"); code {
	case "":
		return nil
	case "503":
		return natsgo.ErrNoResponders
	default:
		return fmt.Errorf("status %s %s", code, m.Header.Get("Description"))
	}
}
