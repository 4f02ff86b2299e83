package policyv1

import (
	"errors"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// FromIdleState converts the listener's idle state to its wire form.
func FromIdleState(s listener.IdleState) *IdleState {
	return &IdleState{Idle: int64(s.Idle), ActiveWorkers: int64(s.ActiveWorkers), PushEnabled: s.PushEnabled}
}

// ToIdleState converts the wire form back to the listener's idle state.
func ToIdleState(s *IdleState) listener.IdleState {
	return listener.IdleState{
		Idle:          int(s.GetIdle()),
		ActiveWorkers: int(s.GetActiveWorkers()),
		PushEnabled:   s.GetPushEnabled(),
	}
}

// FromState converts a listener snapshot to its wire form.
func FromState(s listener.State) *State {
	return &State{
		Queue:           s.Queue,
		Depth:           s.Depth,
		ActiveWorkers:   int64(s.ActiveWorkers),
		PeakWorkers:     int64(s.PeakWorkers),
		HelperWorkers:   s.HelperWorkers,
		MinWorkers:      int64(s.MinWorkers),
		MaxWorkers:      int64(s.MaxWorkers),
		InFlight:        int64(s.InFlight),
		PushEnabled:     s.PushEnabled,
		Processed:       s.Processed,
		Failed:          s.Failed,
		Retried:         s.Retried,
		Poisoned:        s.Poisoned,
		Receives:        s.Receives,
		EmptyReceives:   s.EmptyReceives,
		Deletes:         s.Deletes,
		Updates:         s.Updates,
		Sends:           s.Sends,
		Errors:          s.Errors,
		DepthQueries:    s.DepthQueries,
		LeasesLost:      s.LeasesLost,
		DeadLetterDepth: s.DeadLetterDepth,
		Leased:          int64(s.Leased),
		LeasedIdle:      int64(s.LeasedIdle),
		PeakLeasedIdle:  int64(s.PeakLeasedIdle),
		LatencyP50Nanos: int64(s.LatencyP50),
		LatencyP99Nanos: int64(s.LatencyP99),
	}
}

// ToState converts the wire form back to a listener snapshot.
func ToState(s *State) listener.State {
	return listener.State{
		Queue:           s.GetQueue(),
		Depth:           s.GetDepth(),
		ActiveWorkers:   int(s.GetActiveWorkers()),
		PeakWorkers:     int(s.GetPeakWorkers()),
		HelperWorkers:   s.GetHelperWorkers(),
		MinWorkers:      int(s.GetMinWorkers()),
		MaxWorkers:      int(s.GetMaxWorkers()),
		InFlight:        int(s.GetInFlight()),
		PushEnabled:     s.GetPushEnabled(),
		Processed:       s.GetProcessed(),
		Failed:          s.GetFailed(),
		Retried:         s.GetRetried(),
		Poisoned:        s.GetPoisoned(),
		Receives:        s.GetReceives(),
		EmptyReceives:   s.GetEmptyReceives(),
		Deletes:         s.GetDeletes(),
		Updates:         s.GetUpdates(),
		Sends:           s.GetSends(),
		Errors:          s.GetErrors(),
		DepthQueries:    s.GetDepthQueries(),
		LeasesLost:      s.GetLeasesLost(),
		DeadLetterDepth: s.GetDeadLetterDepth(),
		Leased:          int(s.GetLeased()),
		LeasedIdle:      int(s.GetLeasedIdle()),
		PeakLeasedIdle:  int(s.GetPeakLeasedIdle()),
		LatencyP50:      time.Duration(s.GetLatencyP50Nanos()),
		LatencyP99:      time.Duration(s.GetLatencyP99Nanos()),
	}
}

// FromFailure converts a handler failure to its wire form: the outcome's kind as reject and
// retry_after (a retry without a delay of its own and a failure look alike on the wire), its
// reason as error. The message body and lease token stay in the host.
func FromFailure(f listener.Failure) *Failure {
	o := f.Outcome
	out := &Failure{
		Reject:          o.Kind == outcome.KindReject,
		Error:           o.Reason(),
		MaxDequeueCount: int64(f.MaxDequeueCount),
	}
	if o.Kind == outcome.KindRetry {
		out.RetryAfterNanos = int64(max(o.After, 0))
	}
	if m := f.Message; m != nil {
		out.Message = &Message{
			Id:           m.ID,
			Queue:        m.Queue,
			DequeueCount: int64(m.DequeueCount),
			Attributes:   m.Attributes,
		}
		if !m.InsertedAt.IsZero() {
			out.Message.InsertedAtUnixNanos = m.InsertedAt.UnixNano()
		}
	}
	return out
}

// ToFailure converts the wire form back to a failure: KindReject when reject is set, else
// KindRetry when retry_after is, else KindFailed. Err carries the error text only: the
// error's type does not cross the process boundary.
func ToFailure(f *Failure) listener.Failure {
	o := outcome.Outcome{Kind: outcome.KindFailed}
	switch {
	case f.GetReject():
		o.Kind = outcome.KindReject
	case f.GetRetryAfterNanos() > 0:
		o.Kind, o.After = outcome.KindRetry, time.Duration(f.GetRetryAfterNanos())
	}
	if f.GetError() != "" {
		o.Err = errors.New(f.GetError())
	}
	out := listener.Failure{Outcome: o, MaxDequeueCount: int(f.GetMaxDequeueCount())}
	if m := f.GetMessage(); m != nil {
		out.Message = &queue.Message{
			ID:           m.GetId(),
			Queue:        m.GetQueue(),
			DequeueCount: int(m.GetDequeueCount()),
			Attributes:   m.GetAttributes(),
		}
		if ns := m.GetInsertedAtUnixNanos(); ns != 0 {
			out.Message.InsertedAt = time.Unix(0, ns)
		}
	}
	return out
}

// FromDecision converts a poison policy's answer to its wire form: KindReject is
// ACTION_DEAD_LETTER, KindDrop ACTION_DROP, KindDone, KindRetry and KindFailed ACTION_RETRY
// after After (the listener retries on any answer but those two); Err's text is the reason.
// A kind this version does not know goes as an action the host does not know either, so the
// host answers with its fallback policy (ToDecision's ok).
func FromDecision(o outcome.Outcome) *Decision {
	d := &Decision{Action: Action_ACTION_RETRY, DelayNanos: int64(o.After)}
	switch o.Kind {
	case outcome.KindDone, outcome.KindRetry, outcome.KindFailed:
	case outcome.KindReject:
		d.Action, d.DelayNanos = Action_ACTION_DEAD_LETTER, 0
	case outcome.KindDrop:
		d.Action, d.DelayNanos = Action_ACTION_DROP, 0
	default:
		d.Action = Action(100 + int32(o.Kind))
	}
	if o.Err != nil {
		d.Reason = o.Err.Error()
	}
	return d
}

// ToDecision converts the wire form back to a poison policy's answer. ok is false when the
// action is not one this host knows (a newer or broken plugin), so the caller can fall back.
func ToDecision(d *Decision) (o outcome.Outcome, ok bool) {
	switch d.GetAction() {
	case Action_ACTION_RETRY:
		o = outcome.Outcome{Kind: outcome.KindRetry, After: time.Duration(d.GetDelayNanos())}
	case Action_ACTION_DEAD_LETTER:
		o.Kind = outcome.KindReject
	case Action_ACTION_DROP:
		o.Kind = outcome.KindDrop
	default:
		return outcome.Outcome{}, false
	}
	if r := d.GetReason(); r != "" {
		o.Err = errors.New(r)
	}
	return o, true
}
