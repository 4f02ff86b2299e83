package listener

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"time"

	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// fail settles a failed message as the poison policy decides. It is the one place a
// message becomes poison: every failure comes here (a handler's failure, retry or reject,
// and the listener's own refusals: over the dequeue count, body over the size limit), the
// policy decides, and deadLetter, called from here only, carries out a dead-letter.
func (l *Listener) fail(ctx context.Context, m *queue.Message, o outcome.Outcome) {
	l.c.failed.Add(1)
	d := l.cfg.Poison.Decide(ctx, Failure{Message: m, Outcome: o, MaxDequeueCount: l.cfg.MaxDequeueCount})
	reason := o.Reason()
	if d.Kind == outcome.KindReject && d.Err != nil {
		reason = d.Reason()
	}
	if d.Kind != outcome.KindReject && d.Kind != outcome.KindDrop && (l.cfg.AtMostOnce || isRefusal(o)) {
		// Deleted on receive (at most once): keeping it is all that is left. Refused by the
		// listener: every later delivery would be refused again, so a retry is a loop.
		d.Kind = outcome.KindReject
	}
	log := l.log
	if o.Cause != outcome.CauseNone {
		// Why the call failed, as the host classified it: a key to search logs by.
		log = log.With("cause", o.Cause.String())
	}
	switch d.Kind {
	case outcome.KindReject:
		l.deadLetter(ctx, log, m, reason, o.Attrs)
	case outcome.KindDrop:
		log.Warn("failed message dropped by the poison policy", "id", m.ID, "dequeue_count", m.DequeueCount, "err", reason)
		if !l.cfg.AtMostOnce {
			l.deleteOne(ctx, m)
		}
	default: // KindRetry, and any other answer: retrying never loses the message
		delay := min(max(d.After, 0), queue.MaxVisibility)
		l.c.updates.Add(1)
		if err := l.retryAfter(ctx, m, delay); err != nil {
			if errors.Is(err, queue.ErrLeaseLost) {
				l.leaseLost(m, "the retry's visibility update was refused", err)
				return
			}
			l.c.errorCalls.Add(1)
			l.log.Warn("retry: update visibility; the message returns when its lease expires", "id", m.ID, "err", err)
			return
		}
		l.c.retried.Add(1)
		l.noteDue(time.Now().Add(delay))
		log.Warn("message failed; retrying", "id", m.ID, "dequeue_count", m.DequeueCount, "delay", delay, "err", reason)
	}
}

// noteDue remembers the earliest retry this listener scheduled, so that a push listener
// with no wake-up coming wakes for it.
func (l *Listener) noteDue(t time.Time) {
	if !l.cfg.Push {
		return
	}
	n := t.UnixNano()
	for {
		cur := l.nextDue.Load()
		if cur != 0 && cur <= n {
			return
		}
		if l.nextDue.CompareAndSwap(cur, n) {
			return
		}
	}
}

// deadLetter sends the message to the dead-letter queue with its reason and metadata, then
// deletes the original. If the send fails the original stays (its lease expires and it
// comes back), so a poison message is never lost. extra (the verdict's Attrs) go beside.
// log is the listener's, with the failure's cause when it has one.
func (l *Listener) deadLetter(ctx context.Context, log *slog.Logger, m *queue.Message, reason string, extra map[string]string) {
	attrs := make(map[string]string, len(m.Attributes)+len(extra)+6)
	maps.Copy(attrs, m.Attributes)
	maps.Copy(attrs, extra)
	delete(attrs, queue.AttrReleased) // bookkeeping of the live message, in the dequeue count
	attrs[queue.AttrReason] = reason
	attrs[queue.AttrOriginalID] = m.ID
	attrs[queue.AttrOriginalQueue] = l.q.Name()
	attrs[queue.AttrDequeueCount] = strconv.Itoa(m.DequeueCount)
	attrs[queue.AttrDeadLetteredAt] = time.Now().UTC().Format(time.RFC3339Nano)
	if l.cfg.HandlerVersion != nil {
		attrs[queue.AttrHandlerVersion] = l.cfg.HandlerVersion()
	}
	if mv, ok := queue.As[queue.Mover](l.q); ok && !l.cfg.AtMostOnce {
		err := mv.MoveTo(ctx, m, l.cfg.DeadLetter, m.Body, queue.SendOptions{Attributes: attrs})
		if !errors.Is(err, errors.ErrUnsupported) {
			l.c.sends.Add(1) // one billed write: the send and the delete are one transaction
		}
		switch {
		case err == nil:
			l.c.poisoned.Add(1)
			l.c.deadDirty.Store(true)
			log.Warn("message dead-lettered", "id", m.ID, "dead_letter", l.cfg.DeadLetter.Name(), "dequeue_count", m.DequeueCount, "reason", reason)
			return
		case errors.Is(err, queue.ErrLeaseLost):
			l.leaseLost(m, "the dead-letter move was refused (nothing was dead-lettered)", err)
			return
		case !errors.Is(err, errors.ErrUnsupported):
			l.c.errorCalls.Add(1)
			l.log.Error("dead-letter move failed; the message stays and comes back", "id", m.ID, "dead_letter", l.cfg.DeadLetter.Name(), "err", err)
			return
		}
		// Another store: send, then delete.
	}
	if m.Oversize > 0 {
		// Its body was left in a store that cannot move it to the dead-letter queue: sending
		// an empty body would lose it, so it stays (and comes back) instead.
		l.c.errorCalls.Add(1)
		l.log.Error("cannot dead-letter a message whose body was not loaded; it stays and comes back", "id", m.ID, "dead_letter", l.cfg.DeadLetter.Name(), "bytes", m.Oversize)
		return
	}
	l.c.sends.Add(1)
	if _, err := l.cfg.DeadLetter.Send(ctx, m.Body, queue.SendOptions{Attributes: attrs}); err != nil {
		l.c.errorCalls.Add(1)
		l.log.Error("dead-letter send failed; the message stays and comes back", "id", m.ID, "dead_letter", l.cfg.DeadLetter.Name(), "err", err)
		return
	}
	l.c.poisoned.Add(1)
	l.c.deadDirty.Store(true)
	log.Warn("message dead-lettered", "id", m.ID, "dead_letter", l.cfg.DeadLetter.Name(), "dequeue_count", m.DequeueCount, "reason", reason)
	if !l.cfg.AtMostOnce {
		l.deleteOne(ctx, m)
	}
}

func (l *Listener) deleteOne(ctx context.Context, m *queue.Message) {
	l.c.deletes.Add(1)
	if err := l.q.Delete(ctx, m); err != nil {
		if errors.Is(err, queue.ErrLeaseLost) {
			l.leaseLost(m, "the delete of a dead-lettered or dropped message was refused", err)
			return
		}
		l.c.errorCalls.Add(1)
		l.log.Error("delete", "id", m.ID, "err", err)
	}
}
