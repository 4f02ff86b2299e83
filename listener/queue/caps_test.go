package queue

import (
	"math/bits"
	"testing"
)

// TestCapabilityTableComplete fails when a capability is added to CapAll without its row in
// caps and its case in capOf: Of, As and String would silently miss it.
func TestCapabilityTableComplete(t *testing.T) {
	if len(caps) != bits.OnesCount32(uint32(CapAll)) {
		t.Fatalf("caps lists %d capabilities, CapAll has %d", len(caps), bits.OnesCount32(uint32(CapAll)))
	}
	seen := Caps(0)
	for _, x := range caps {
		if x.c&seen != 0 || bits.OnesCount32(uint32(x.c)) != 1 {
			t.Fatalf("capability %q: bit %b repeated or not single", x.name, x.c)
		}
		seen |= x.c
	}
	if seen != CapAll {
		t.Fatalf("caps cover %b, CapAll is %b", seen, CapAll)
	}
	checks := map[Caps]Caps{
		CapBatch: capOf[Batcher](), CapBodyLimit: capOf[BodyLimiter](), CapWait: capOf[Waiter](),
		CapWatch: capOf[Watcher](), CapWatchFunc: capOf[FuncWatcher](), CapMove: capOf[Mover](),
		CapRenew: capOf[Renewer](), CapOrdered: capOf[OrderedReceiver](), CapPeek: capOf[Peeker](),
		CapCount: capOf[Counter](), CapMaxBytes: capOf[MessageLimiter](), CapRelease: capOf[Releaser](),
		CapScan: capOf[Scanner](), CapSweep: capOf[Sweeper](),
	}
	if len(checks) != len(caps) {
		t.Fatalf("this test checks %d capabilities of %d: add the new one", len(checks), len(caps))
	}
	for want, got := range checks {
		if got != want {
			t.Errorf("capOf of %s = %s", want, got)
		}
	}
}

// TestDecoratorForwardsEveryCapability fails when a capability is added to the contract and
// Decorator lacks its methods: every wrapper built on it would drop the capability.
func TestDecoratorForwardsEveryCapability(t *testing.T) {
	var d Queue = Decorator{}
	for _, x := range caps {
		if !x.has(d) {
			t.Errorf("Decorator does not forward capability %q", x.name)
		}
	}
}
