package host

import (
	"fmt"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/internal/goroutinetest"
)

// Idle push bindings on the local store hold no goroutine, neither the listener's nor one of
// the host's per binding: a host of many idle bindings costs none per binding. A message
// sent to each is handled, after which they are idle again, and the host stops cleanly.
func TestIdlePushBindingsHoldNoGoroutine(t *testing.T) {
	echo := abs(t, flakyWasm)
	const n = 5
	var y strings.Builder
	y.WriteString("  default:\n    bindings:\n")
	for i := range n {
		fmt.Fprintf(&y, "      b%d: {queue: in%d, output: out%d, module: %q, push: true}\n", i, i, i, echo)
	}
	h, _ := newHost(t, y.String())
	held := func() int {
		return goroutinetest.Count("wqhost/listener.(*Listener).") + goroutinetest.Count("wqhost/host.(*runner).")
	}
	stop := run(t, h)
	t.Cleanup(func() { _ = stop() })
	eventually(t, "the idle bindings to hold no goroutine", func() bool { return held() == 0 })
	for i := range n {
		send(t, h, "default", fmt.Sprint("in", i), "hello")
	}
	for i := range n {
		eventually(t, fmt.Sprintf("binding b%d's output", i), func() bool { return depth(t, h, "default", fmt.Sprint("out", i)) == 1 })
	}
	eventually(t, "the bindings to hold no goroutine once idle again", func() bool { return held() == 0 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
