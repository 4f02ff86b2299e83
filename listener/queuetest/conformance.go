package queuetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/queue"
)

// Factory returns a fresh, empty Backend for one test case, and a function that advances the
// backend's clock. Backends that cannot fake time (Azure) return a nil advance; the suite then
// skips the cases that depend on time passing. The factory registers its own cleanup (Close).
type Factory func(t *testing.T) (b queue.Backend, advance func(time.Duration))

// Suite is one backend or wrapper under test.
type Suite struct {
	// Name names it in the summary line.
	Name string
	// New makes a fresh backend for each case.
	New Factory
	// Reopen, for a durable store, abandons b as a crash would (no settle, no clean close
	// needed) and opens the same store again. Nil: crash recovery is not claimed.
	Reopen func(t *testing.T, b queue.Backend) queue.Backend
	// Skip names the cases that do not apply, with why (shown in the test log).
	Skip map[string]string
}

// A contract case: core ones (needs 0) always run; a capability's runs when the backend's
// queues have it; a fallback (hide) runs with that capability hidden, present or not.
type contractCase struct {
	name  string
	needs queue.Caps // run only when the queue has all of these
	hide  queue.Caps // run with these capabilities hidden (the listener's fallback)
	timed bool       // needs the backend's clock advanced
	run   func(t *testing.T, b queue.Backend, advance func(time.Duration))
}

func contractCases() []contractCase {
	return []contractCase{
		{name: "RoundTripBodies", run: testRoundTrip},
		{name: "ReceiveCappedAtMaxBatch", run: testReceiveCap},
		{name: "EmptyReceive", run: testEmptyReceive},
		{name: "LeasedInvisibleThenRedelivered", timed: true, run: testRedelivery},
		{name: "StaleTokenLeaseLost", timed: true, run: testStaleToken},
		{name: "StaleTokenAfterUpdate", run: testStaleAfterUpdate},
		{name: "ReleaseReturnsToHead", run: testReleaseToHead},
		{name: "UpdateVisibilityDelays", timed: true, run: testUpdateVisibilityDelay},
		{name: "DelayedSend", timed: true, run: testDelayedSend},
		{name: "AttributesKept", run: testAttributes},
		{name: "DepthApproximate", run: testDepth},
		{name: "NamedQueuesIndependent", run: testIndependentQueues},
		{name: "ConcurrentReceiversExclusive", run: testConcurrentReceivers},
		{name: "PurgeEmptiesQueue", run: testPurge},
		{name: "RequeueFromPoison", run: testRequeue},
		{name: "ListenerRetryAfter", run: testListenerRetryAfter},
		{name: "ListenerRejectDeadLettersOnce", run: testListenerReject},
		{name: "ListenerFailuresDeadLetterAtMaxDequeue", run: testListenerMaxDequeue},
		{name: "ListenerRenewsLongCalls", run: testListenerRenews},
		{name: "BatchListenerSettlesEachMessage", run: testBatchListener},

		{name: "Batcher", needs: queue.CapBatch, run: testBatcher},
		{name: "BodyLimiter", needs: queue.CapBodyLimit, run: testBodyLimiter},
		{name: "WaiterWakesOnSend", needs: queue.CapWait, run: testWaiter},
		{name: "WatcherSignalsWrites", needs: queue.CapWatch, run: watchers(byChan, testWatcher)},
		{name: "WatcherNoLostWakeUp", needs: queue.CapWatch, run: watchers(byChan, testWatcherNoLostWakeUp)},
		{name: "FuncWatcherSignalsWrites", needs: queue.CapWatchFunc, run: watchers(byFunc, testWatcher)},
		{name: "FuncWatcherNoLostWakeUp", needs: queue.CapWatchFunc, run: watchers(byFunc, testWatcherNoLostWakeUp)},
		{name: "PushListenerNoLostWakeUp", needs: queue.CapWatchFunc, run: testPushListenerNoLostWakeUp},
		{name: "MoverMovesOnce", needs: queue.CapMove, run: testMover},
		{name: "RenewerExtendsLease", needs: queue.CapRenew, timed: true, run: testRenewer},
		{name: "OrderedGroups", needs: queue.CapOrdered, run: testOrderedGroups},
		{name: "OrderedLeavesOversizeUnread", needs: queue.CapOrdered, run: testOrderedOversize},
		{name: "PeekLeavesMessages", needs: queue.CapPeek, run: testPeek},
		{name: "CountsSplitDepth", needs: queue.CapCount, timed: true, run: testCounts},
		{name: "MaxMessageBytesAccepted", needs: queue.CapMaxBytes, run: testMaxBytes},
		{name: "ReleaserKeepsDequeueCount", needs: queue.CapRelease, run: testReleaser},
		{name: "ListenerStopKeepsDequeueCounts", needs: queue.CapRelease, run: testListenerStopKeepsCounts},
		{name: "ScannerPagesFilterCursor", needs: queue.CapScan, run: testScanner},
		{name: "SweeperDeletesAndMovesSnapshot", needs: queue.CapSweep, run: testSweeper},
		{name: "OrderedReleaseKeepsPlaceAndCount", needs: queue.CapOrdered | queue.CapRelease, run: testOrderedRelease},

		{name: "FallbackBatchDeletesEach", hide: queue.CapBatch, run: testListenerDrains},
		{name: "FallbackBodyLimitLoadsThenDeadLetters", hide: queue.CapBodyLimit, run: testListenerOversize},
		{name: "FallbackPushPolls", hide: queue.CapWait | queue.CapWatch | queue.CapWatchFunc, run: testListenerPushPolls},
		{name: "FallbackMoveSendsThenDeletes", hide: queue.CapMove, run: testListenerReject},
		{name: "FallbackRenewUpdatesVisibility", hide: queue.CapRenew, run: testListenerRenews},
		{name: "FallbackOrderedRefused", hide: queue.CapOrdered, run: testOrderedRefused},
		{name: "FallbackCountsDepthTotal", hide: queue.CapCount | queue.CapPeek, run: testDepth},
		{name: "FallbackMaxBytesListenerLimit", hide: queue.CapMaxBytes, run: testListenerOversize},

		{name: "CrashRecovery", run: nil}, // set by Run when the suite has Reopen
	}
}

// Run runs the contract against the backends s.New makes and prints one summary line:
//
//	conformance <name>: capabilities=<list> passed=<n> absent=<list>
func Run(t *testing.T, s Suite) {
	t.Helper()
	probe, _ := s.New(t)
	have := queue.Of(open(t, probe, "probe"))
	var passed atomic.Int64
	for _, c := range contractCases() {
		if c.name == "CrashRecovery" {
			if s.Reopen == nil {
				continue
			}
			c.run = func(t *testing.T, b queue.Backend, advance func(time.Duration)) {
				testCrashRecovery(t, b, advance, s.Reopen)
			}
		}
		t.Run(c.name, func(t *testing.T) {
			if why, ok := s.Skip[c.name]; ok {
				t.Skip(why)
			}
			if c.needs&have != c.needs {
				t.Skipf("capability %s is absent: its fallback is tested", c.needs&^have)
			}
			b, advance := s.New(t)
			if c.timed && advance == nil {
				t.Skip("backend cannot advance time")
			}
			if c.hide != 0 {
				b = hiding{b, c.hide}
			}
			c.run(t, b, advance)
			if !t.Skipped() && !t.Failed() {
				passed.Add(1)
			}
		})
	}
	caps := have.String()
	if s.Reopen != nil {
		caps = strings.TrimPrefix(caps+",durable", ",")
	}
	fmt.Printf("conformance %s: capabilities=%s passed=%d absent=%s\n", s.Name, caps, passed.Load(), queue.CapAll&^have)
}

// hiding is a backend whose queues hide some capabilities, so that the listener takes its
// fallback for them.
type hiding struct {
	queue.Backend
	hide queue.Caps
}

func (h hiding) Open(ctx context.Context, name string) (queue.Queue, error) {
	q, err := h.Backend.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return hidden{queue.Decorator{Queue: q}, h.hide}, nil
}

type hidden struct {
	queue.Decorator
	hide queue.Caps
}

func (h hidden) Capabilities() queue.Caps { return h.Decorator.Capabilities() &^ h.hide }
