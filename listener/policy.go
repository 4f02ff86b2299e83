package listener

import (
	"context"
	"time"

	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
)

// State is a snapshot of a listener (the whitepaper's QueryState). Policies decide from it
// and the host reports it.
type State struct {
	Queue string
	Depth int64 // approximate, from the last depth query; -1 until the first
	// DeadLetterDepth is the dead-letter queue's depth at its last read (at Run's start,
	// and after dead-lettering); -1 until the first.
	DeadLetterDepth int64
	ActiveWorkers   int
	PeakWorkers     int
	// HelperWorkers counts the workers started because a batch's slow messages held its
	// worker while lease budget was free (see Config.HandlerSlots).
	HelperWorkers uint64
	MinWorkers    int
	MaxWorkers    int
	InFlight      int
	PushEnabled   bool

	Processed uint64
	Failed    uint64
	Retried   uint64
	Poisoned  uint64

	// Queue calls: the whitepaper's cost model.
	Receives      uint64
	EmptyReceives uint64
	Deletes       uint64
	Updates       uint64
	Sends         uint64
	Errors        uint64 // backend calls that failed
	DepthQueries  uint64 // Depth calls, kept rare: they are billed like any other call
	LeasesLost    uint64 // messages whose lease expired before they were settled
	// Released counts the messages given back unstarted (a stop, a batch cut short): with a
	// queue.Releaser their dequeue counts are not raised.
	Released uint64

	// Leased counts the messages leased and not yet settled (bounded by
	// Config.HandlerSlots+Prefetch); LeasedIdle those of them not started yet, and
	// PeakLeasedIdle its highest value so far.
	Leased         int
	LeasedIdle     int
	PeakLeasedIdle int

	// Counts splits Depth, read with it (never by State): from the queue's Counter when it
	// has one (CountsExact), queue-wide. Otherwise Visible is Depth less this listener's
	// Leased (other hosts' leases and delayed messages stay in it), Leased is this
	// listener's and Delayed 0.
	Counts      queue.Counts
	CountsExact bool

	LatencyP50 time.Duration
	LatencyP99 time.Duration
}

// IdleState is what the back-off policy sees after an empty receive.
type IdleState struct {
	// Idle counts the consecutive empty receives of this worker, this one included (>= 1).
	Idle int
	// ActiveWorkers is the number of dequeue workers running, this one included.
	ActiveWorkers int
	// PushEnabled says wake-ups reach the listener without polling (Notify or a Waiter),
	// so the last worker may stop too.
	PushEnabled bool
}

// Backoff decides how long a worker sleeps after an empty receive and whether it stops.
type Backoff interface {
	// Next returns the delay before the worker's next receive, and stop = true when the
	// worker should exit instead. The listener clamps the delay to its configured bounds and
	// never stops the last worker unless push wake-ups are enabled.
	Next(ctx context.Context, s IdleState) (delay time.Duration, stop bool)
}

// IdlePacer grants a listener's idle receives from a budget it shares with other listeners
// (Config.IdlePacer; listener/pollbudget implements it). The listener enrols when its queue
// is empty and waits for the grant in the same select as its wake-ups, so an idle listener
// holds no timer of its own.
type IdlePacer interface {
	// Enrol puts the listener in line for its next idle receive and returns a channel that
	// receives when that receive may be made.
	Enrol() <-chan struct{}
	// Withdraw ends the wait Enrol began, whether the grant came or the listener stopped
	// waiting for another reason (a wake-up, shutdown).
	Withdraw()
	// Found reports that a receive found messages: the pacer favours recently active queues.
	Found()
}

// Scaler decides how many dequeue workers a listener should run when work appears.
type Scaler interface {
	// Desired returns the wanted number of workers; the listener clamps it to min..max.
	Desired(ctx context.Context, s State) int
}

// Failure is a message whose handler call did not end in outcome.KindDone, as a
// PoisonPolicy sees it.
type Failure struct {
	Message *queue.Message
	// Outcome is the handler's: KindRetry (After is the delay it asked for, 0 for none),
	// KindReject, or KindFailed. The listener's own refusals (body over MaxMessageBytes,
	// dequeue count over MaxDequeueCount) come as KindReject whose Err is the reason as is;
	// a refused message is never retried: the listener dead-letters it if the policy answers
	// retry.
	Outcome outcome.Outcome
	// MaxDequeueCount is the binding's configured limit.
	MaxDequeueCount int
}

// PoisonPolicy decides what becomes of a message whose handler failed. Its answer is an
// outcome: KindRetry makes the message visible again after After (capped at
// queue.MaxVisibility), KindReject dead-letters it now with Err's text as the reason (nil
// Err: the handler's reason; outcome.DeadLetter builds it), KindDrop deletes it without a
// dead letter. Any other answer retries after After: retrying never loses the message.
type PoisonPolicy interface {
	Decide(ctx context.Context, f Failure) outcome.Outcome
}
