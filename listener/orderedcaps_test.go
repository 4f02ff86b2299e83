package listener

import (
	"context"
	"testing"

	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

type allCaps struct{ queue.Decorator }

func (allCaps) Capabilities() queue.Caps { return queue.CapAll }

// TestOrderedForwardsEveryCapability walks the contract's capabilities: the ordered wrapper
// provides each one of the queue below, except those it replaces with its own (listed here
// with why). A capability added to the contract fails here until the wrapper decides.
func TestOrderedForwardsEveryCapability(t *testing.T) {
	withheld := map[queue.Caps]string{
		queue.CapWatch:     "its own Wait ends on a settle; the store's watch would report held-back messages visible",
		queue.CapWatchFunc: "as for watch",
		queue.CapOrdered:   "it is the ordered receive's consumer",
		queue.CapSweep:     "a sweep's deletes would bypass the set of leased messages it keeps",
	}
	inner, err := memory.New(memory.Options{}).Open(context.Background(), "o")
	if err != nil {
		t.Fatal(err)
	}
	o, err := ordered(allCaps{queue.Decorator{Queue: inner}})
	if err != nil {
		t.Fatal(err)
	}
	got := queue.Of(o)
	for c := queue.Caps(1); c&queue.CapAll != 0; c <<= 1 {
		_, isWithheld := withheld[c]
		if has := got&c != 0; has == isWithheld {
			t.Errorf("ordered wrapper: capability %s advertised=%v, withheld=%v", c, has, isWithheld)
		}
	}
}
