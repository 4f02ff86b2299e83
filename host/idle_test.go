package host

import (
	"fmt"
	"testing"
)

// An idle binding holds no instance: with the default min_instances it starts with none, a
// message instantiates one, and after pool.idle_timeout without work it is closed again;
// the next message is handled as before. A binding that sets min_instances keeps them.
func TestIdleBindingScalesToZero(t *testing.T) {
	echo := abs(t, flakyWasm)
	h, _ := newHost(t, fmt.Sprintf(`
  default:
    bindings:
      lazy: {queue: in, output: out, module: %q, pool: {idle_timeout: 100ms}}
      warm: {queue: warm-in, output: warm-out, module: %q, pool: {min_instances: 1, idle_timeout: 100ms}}
`, echo, echo))
	stop := run(t, h)
	t.Cleanup(func() { _ = stop() })
	instances := func(b string) int { return bindingStatus(t, h, "default", b).Pool.Instances }
	if n := instances("lazy"); n != 0 {
		t.Fatalf("an idle binding with the default min_instances holds %d instances, want 0", n)
	}
	for i := range 2 {
		send(t, h, "default", "in", fmt.Sprint("hello-", i))
		eventually(t, "the output", func() bool { return depth(t, h, "default", "out") == int64(i+1) })
		eventually(t, "the idle instance to close", func() bool { return instances("lazy") == 0 })
	}
	send(t, h, "default", "warm-in", "hello")
	eventually(t, "the warm binding's output", func() bool { return depth(t, h, "default", "warm-out") == 1 })
	if calls := bindingStatus(t, h, "default", "lazy").Pool.Calls; calls != 2 {
		t.Errorf("lazy binding made %d calls, want 2", calls)
	}
	// The lazy binding's instance closed twice; by then the warm one was due as often.
	if n := instances("warm"); n != 1 {
		t.Errorf("a binding with min_instances 1 holds %d instances after idling, want 1", n)
	}
}
