package queue

import "strings"

// Caps is a set of optional capabilities, one bit each.
type Caps uint32

// The capabilities, one per optional interface.
const (
	CapBatch     Caps = 1 << iota // Batcher
	CapBodyLimit                  // BodyLimiter
	CapWait                       // Waiter
	CapWatch                      // Watcher
	CapWatchFunc                  // FuncWatcher
	CapMove                       // Mover
	CapRenew                      // Renewer
	CapOrdered                    // OrderedReceiver
	CapPeek                       // Peeker
	CapCount                      // Counter
	CapMaxBytes                   // MessageLimiter
	CapRelease                    // Releaser
	CapScan                       // Scanner
	CapSweep                      // Sweeper

	// CapAll is every capability of the contract.
	CapAll = CapSweep<<1 - 1
)

// caps lists each capability with its name and its interface check.
var caps = []struct {
	c    Caps
	name string
	has  func(Queue) bool
}{
	{CapBatch, "batch", is[Batcher]},
	{CapBodyLimit, "body-limit", is[BodyLimiter]},
	{CapWait, "wait", is[Waiter]},
	{CapWatch, "watch", is[Watcher]},
	{CapWatchFunc, "watch-func", is[FuncWatcher]},
	{CapMove, "move", is[Mover]},
	{CapRenew, "renew", is[Renewer]},
	{CapOrdered, "ordered", is[OrderedReceiver]},
	{CapPeek, "peek", is[Peeker]},
	{CapCount, "count", is[Counter]},
	{CapMaxBytes, "max-bytes", is[MessageLimiter]},
	{CapRelease, "release", is[Releaser]},
	{CapScan, "scan", is[Scanner]},
	{CapSweep, "sweep", is[Sweeper]},
}

func is[T any](q Queue) bool { _, ok := q.(T); return ok }

// String lists the capabilities' names, comma-separated ("" for none).
func (c Caps) String() string {
	var names []string
	for _, x := range caps {
		if c&x.c != 0 {
			names = append(names, x.name)
		}
	}
	return strings.Join(names, ",")
}

// Advertiser is implemented by a wrapper whose method set is wider than what it can do: it
// has every capability's methods and says which of them work (those all its inner queues
// have). As and Of honour it; a capability it does not advertise is absent.
type Advertiser interface {
	Capabilities() Caps
}

// Of returns q's capabilities: the interfaces it implements, narrowed by Capabilities when it
// is an Advertiser.
func Of(q Queue) Caps {
	var c Caps
	for _, x := range caps {
		if x.has(q) {
			c |= x.c
		}
	}
	if a, ok := q.(Advertiser); ok {
		c &= a.Capabilities()
	}
	return c
}

// As returns q as the capability interface T (Batcher, Waiter, …) when q has it.
func As[T any](q Queue) (T, bool) {
	t, ok := q.(T)
	if !ok {
		return t, false
	}
	if a, isAd := q.(Advertiser); isAd && a.Capabilities()&capOf[T]() == 0 {
		var zero T
		return zero, false
	}
	return t, true
}

// capOf maps a capability interface to its bit; any other interface is always "had".
func capOf[T any]() Caps {
	switch any((*T)(nil)).(type) {
	case *Batcher:
		return CapBatch
	case *BodyLimiter:
		return CapBodyLimit
	case *Waiter:
		return CapWait
	case *Watcher:
		return CapWatch
	case *FuncWatcher:
		return CapWatchFunc
	case *Mover:
		return CapMove
	case *Renewer:
		return CapRenew
	case *OrderedReceiver:
		return CapOrdered
	case *Peeker:
		return CapPeek
	case *Counter:
		return CapCount
	case *MessageLimiter:
		return CapMaxBytes
	case *Releaser:
		return CapRelease
	case *Scanner:
		return CapScan
	case *Sweeper:
		return CapSweep
	}
	return CapAll
}
