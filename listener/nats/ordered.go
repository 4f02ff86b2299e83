package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/listener/queue"
)

// Ordered execution groups map onto subjects. A queue named in Options.Ordered publishes a
// message that carries an order key (queue.AttrOrderKey, an integer; anything else counts
// as 0, as on the local store) to <subject>.o.<group>, which its stream captures as well
// (<subject>.o.*), and one without a key to <subject>. Each group is consumed through a
// durable consumer of its own, <consumer>_o<group>, filtered on the group's subject and
// shared by every host (deleted by the server after an hour unused). ReceiveOrdered finds
// the lowest group still in the stream from the stream's per-subject counts: a work-queue
// stream keeps a message until it is acked, so leased messages and those waiting for a
// retry hold the next group back on every host alike. It leases from that group's consumer
// and fills up with messages without a key.
//
// While a group is held back behind messages in flight, ReceiveOrdered reports heldUntil
// heldPoll ahead: the server does not announce another host's acks, so a waiting host
// looks again then (a stream info and two pulls); this host's own settles wake it at once.
// An idle ordered queue is woken by its held pull (messages without a key) and by a core
// subscription on the group subjects, open while a watch is.

// heldPoll is how soon an ordered receive held back by messages in flight looks again.
const heldPoll = 500 * time.Millisecond

// hintPoll is how soon an ordered receive woken by a group publish it did not find looks
// again, within a second of the publish.
const hintPoll = 20 * time.Millisecond

// groupInactive is how long a group's consumer lives unused before the server deletes it.
const groupInactive = time.Hour

var _ queue.OrderedReceiver = (*Queue)(nil)

// orderGroup is the group of an order key: its integer value, 0 for one that is not.
func orderGroup(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func (q *Queue) groupSubject(g int64) string { return q.subject + ".o." + strconv.FormatInt(g, 10) }

// groupsSubject is the wildcard that captures every group of the queue.
func (q *Queue) groupsSubject() string { return q.subject + ".o.*" }

func (q *Queue) groupConsumer(g int64) string {
	return q.b.opts.Consumer + "_o" + strconv.FormatInt(g, 10)
}

// Capabilities implements queue.Advertiser: ordered receive only on a queue named in
// Options.Ordered. The server cannot leave a body unread (no body limit).
func (q *Queue) Capabilities() queue.Caps {
	c := queue.CapAll &^ queue.CapBodyLimit
	if !q.ordered {
		c &^= queue.CapOrdered
	}
	return c
}

// subscribeGroupsLocked opens the core subscription on the group subjects that wakes an idle
// ordered queue, for as long as the held pull runs. A message published before it opened is
// not announced, so it sets the group hint: the next watch reports a message visible.
func (q *Queue) subscribeGroupsLocked() {
	if q.groupSub != nil {
		return
	}
	sub, err := q.b.nc.Subscribe(q.groupsSubject(), func(*natsgo.Msg) {
		q.mu.Lock()
		q.groupHint, q.groupHintAt = true, time.Now()
		q.mu.Unlock()
		q.wake.Fire()
	})
	if err != nil {
		q.b.log.Warn("nats: subscribe to the order groups; an idle ordered queue waits for its fallback poll", "queue", q.name, "err", err)
		return
	}
	q.groupSub = sub
	q.groupHint, q.groupHintAt = true, time.Now()
}

// endPullLocked records that the held pull ended, and closes the group subscription.
func (q *Queue) endPullLocked() {
	q.pulling = false
	if q.groupSub != nil {
		_ = q.groupSub.Unsubscribe()
		q.groupSub = nil
	}
}

// takeGroupHint clears the group hint and returns when it was set (zero: not set).
func (q *Queue) takeGroupHint() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.groupHint {
		return time.Time{}
	}
	q.groupHint = false
	return q.groupHintAt
}

// ensureGroup creates (or finds) the durable consumer of group g.
func (q *Queue) ensureGroup(ctx context.Context, g int64) (string, error) {
	name := q.groupConsumer(g)
	q.mu.Lock()
	ok := q.groups[g]
	q.mu.Unlock()
	if ok {
		return name, nil
	}
	_, err := q.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:           name,
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           q.b.opts.AckWait,
		MaxDeliver:        -1,
		MaxAckPending:     -1,
		FilterSubject:     q.groupSubject(g),
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: groupInactive,
	})
	if err != nil {
		return "", fmt.Errorf("nats: %s: consumer %s of order group %d: %w", q.name, name, g, err)
	}
	q.mu.Lock()
	q.groups[g] = true
	q.mu.Unlock()
	return name, nil
}

// groupCounts returns the groups still in the stream, lowest first, with their messages.
func (q *Queue) groupCounts(ctx context.Context) ([]int64, map[int64]uint64, error) {
	si, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(q.groupsSubject()))
	if err != nil {
		return nil, nil, fmt.Errorf("nats: %s: order groups: %w", q.name, err)
	}
	counts := map[int64]uint64{}
	prefix := q.subject + ".o."
	for subj, n := range si.State.Subjects {
		g, err := strconv.ParseInt(strings.TrimPrefix(subj, prefix), 10, 64)
		if err != nil || n == 0 || !strings.HasPrefix(subj, prefix) {
			continue // published there by another client, not as a group
		}
		counts[g] += n
	}
	groups := make([]int64, 0, len(counts))
	for g := range counts {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	return groups, counts, nil
}

// ReceiveOrdered implements queue.OrderedReceiver: it leases up to max visible messages of
// the lowest order group still in the stream, then messages without an order key. A body
// above maxBody (> 0) comes back with Body nil and Oversize set, as the contract asks, but
// it was fetched: the server cannot leave it (memory is bounded by max_payload); a dead
// letter moves the fetched body.
func (q *Queue) ReceiveOrdered(ctx context.Context, max int, visibility time.Duration, maxBody int64) ([]*queue.Message, time.Time, error) {
	if !q.ordered {
		return nil, time.Time{}, fmt.Errorf("nats: ordered receive from %s: the queue is not ordered (no ordered binding reads it)", q.name)
	}
	if max < 1 {
		return nil, time.Time{}, fmt.Errorf("nats: ordered receive from %s: max %d < 1", q.name, max)
	}
	max = min(max, queue.MaxBatch)
	hinted := q.takeGroupHint()
	groups, _, err := q.groupCounts(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	var out []*queue.Message
	if len(groups) > 0 {
		cons, err := q.ensureGroup(ctx, groups[0])
		if err != nil {
			return nil, time.Time{}, err
		}
		start := time.Now()
		ds, err := q.fetchFrom(ctx, cons, max, 0)
		q.readReleases(ctx, ds)
		if err != nil && !errors.Is(err, context.Canceled) && len(ds) == 0 {
			// The group's consumer may be gone (deleted after an hour unused): the next
			// receive makes sure of it again.
			q.mu.Lock()
			delete(q.groups, groups[0])
			q.mu.Unlock()
			return nil, time.Time{}, fmt.Errorf("nats: ordered receive from %s, group %d: %w", q.name, groups[0], err)
		}
		for _, d := range ds {
			if m := q.admit(d, start, visibility, false); m != nil {
				out = append(out, m)
			}
		}
	}
	if len(out) < max {
		more, err := q.Receive(ctx, max-len(out), visibility)
		if err != nil && len(out) == 0 {
			return nil, time.Time{}, err
		}
		out = append(out, more...)
	}
	var heldUntil time.Time
	switch {
	case len(out) == 0 && len(groups) > 1:
		heldUntil = time.Now().Add(heldPoll)
	case len(out) == 0 && !hinted.IsZero() && time.Since(hinted) < time.Second:
		// A group publish woke the receive, but the stream may not have stored it yet
		// (a core subscriber hears it as the stream does): look again shortly.
		heldUntil = time.Now().Add(hintPoll)
	}
	if maxBody > 0 {
		for _, m := range out {
			if int64(len(m.Body)) > maxBody {
				q.keepBody(m)
			}
		}
	}
	if out == nil {
		out = []*queue.Message{}
	}
	return out, heldUntil, nil
}

// keepBody leaves m's body with its lease only, as an unread body (Oversize): a dead letter
// (MoveTo) moves it from there.
func (q *Queue) keepBody(m *queue.Message) {
	q.mu.Lock()
	if l, ok := q.leases[m.ID]; ok {
		l.body = m.Body
	}
	q.mu.Unlock()
	m.Oversize, m.Body = int64(len(m.Body)), nil
}
