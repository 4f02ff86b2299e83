package policyv1

import (
	"errors"
	"time"

	"github.com/wqhost/wqhost/listener"
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

// FromFailure converts a handler failure to its wire form. The message body and lease token
// stay in the host.
func FromFailure(f listener.Failure) *Failure {
	out := &Failure{
		Reject:          f.Reject,
		RetryAfterNanos: int64(f.RetryAfter),
		MaxDequeueCount: int64(f.MaxDequeueCount),
	}
	if f.Err != nil {
		out.Error = f.Err.Error()
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

// ToFailure converts the wire form back to a failure. Err carries the error text only: the
// error's type does not cross the process boundary.
func ToFailure(f *Failure) listener.Failure {
	out := listener.Failure{
		Reject:          f.GetReject(),
		RetryAfter:      time.Duration(f.GetRetryAfterNanos()),
		MaxDequeueCount: int(f.GetMaxDequeueCount()),
	}
	if f.GetError() != "" {
		out.Err = errors.New(f.GetError())
	}
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

// FromDecision converts a poison decision to its wire form.
func FromDecision(d listener.Decision) *Decision {
	return &Decision{Action: Action(d.Action), DelayNanos: int64(d.Delay), Reason: d.Reason}
}

// ToDecision converts the wire form back to a decision. ok is false when the action is not
// one this host knows (a newer or broken plugin), so the caller can fall back.
func ToDecision(d *Decision) (dec listener.Decision, ok bool) {
	a := listener.Action(d.GetAction())
	switch a {
	case listener.ActionRetry, listener.ActionDeadLetter, listener.ActionDrop:
	default:
		return listener.Decision{}, false
	}
	return listener.Decision{Action: a, Delay: time.Duration(d.GetDelayNanos()), Reason: d.GetReason()}, true
}
