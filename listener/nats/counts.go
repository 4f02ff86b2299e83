package nats

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// Counts implements queue.Counter from one consumer info request:
//
//	Visible  NumPending (not yet delivered) plus the messages this process's held pull
//	         brought and no receive took yet
//	Leased   NumAckPending (delivered, not acked: leased by some host, or waiting for a
//	         NakWithDelay retry) less the two other parts
//	Delayed  the delayed sends this process pulled early and sent back (NakWithDelay for the
//	         time left) whose time has not come, at most NumAckPending
//
// The server does not tell a delayed send from a visible message: a delayed send no host
// has pulled yet counts as visible, and one another host sent back counts as leased. An
// idle consumer's held pull brings a delayed send within a moment of its publish, so on a
// single host Delayed is exact but for that moment; with several hosts each counts its own.
func (q *Queue) Counts(ctx context.Context) (queue.Counts, error) {
	pending, acked, err := q.pendingSums(ctx)
	if err != nil {
		return queue.Counts{}, err
	}
	now := time.Now()
	q.mu.Lock()
	var delayed int64
	for seq, due := range q.early {
		if !now.Before(due) {
			delete(q.early, seq)
			continue
		}
		delayed++
	}
	held := int64(len(q.held))
	q.mu.Unlock()
	delayed = min(delayed, int64(acked))
	held = min(held, int64(acked)-delayed)
	return queue.Counts{Visible: int64(pending) + held, Leased: int64(acked) - delayed - held, Delayed: delayed}, nil
}

// pendingSums returns NumPending and NumAckPending of the queue's consumer, summed over its
// order groups' consumers too on an ordered queue (one listing of the stream's consumers).
func (q *Queue) pendingSums(ctx context.Context) (pending, acked uint64, err error) {
	if !q.ordered {
		ci, err := q.cons.Info(ctx)
		if err != nil {
			return 0, 0, fmt.Errorf("nats: counts of %s: %w", q.name, err)
		}
		return ci.NumPending, uint64(ci.NumAckPending), nil
	}
	l := q.stream.ListConsumers(ctx)
	main := q.b.opts.Consumer
	for ci := range l.Info() {
		if ci.Name == main || strings.HasPrefix(ci.Name, main+"_o") {
			pending += ci.NumPending
			acked += uint64(ci.NumAckPending)
		}
	}
	if err := l.Err(); err != nil {
		return 0, 0, fmt.Errorf("nats: counts of %s: list consumers: %w", q.name, err)
	}
	return pending, acked, nil
}

// sentBack records a delayed send delivered early and sent back until due.
func (q *Queue) sentBack(seq uint64, due time.Time) {
	q.mu.Lock()
	if q.early == nil {
		q.early = map[uint64]time.Time{}
	}
	q.early[seq] = due
	q.mu.Unlock()
}
