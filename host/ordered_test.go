package host

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/wqhost/wqhost/listener/queue"
)

// TestOrderedBindingEmitsGroupByGroup runs a binding with ordered: true through the host:
// messages of three groups, sent shuffled, are all handled, and every output of group N is
// sent before any output of group N+1 (a handler's outputs are sent before its message is
// settled, and group N+1 is received only after group N settled).
func TestOrderedBindingEmitsGroupByGroup(t *testing.T) {
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	h, _ := newHost(t, fmt.Sprintf(`
  acme:
    bindings:
      steps: {queue: in, output: out, module: %q, ordered: true, max_workers: 4, batch_size: 4, pool: {max_instances: 4}, backoff: {min: 5ms, max: 20ms}}
`, echo))
	// Every message is in the queue before the host starts: ordering is among the messages
	// present, and a group sent after a later group started cannot jump back ahead of it.
	q, err := h.OpenQueue(context.Background(), "acme", "in")
	if err != nil {
		t.Fatal(err)
	}
	var groups []int
	for g := 1; g <= 3; g++ {
		for range 8 {
			groups = append(groups, g*100)
		}
	}
	rand.New(rand.NewPCG(6, 1)).Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	for i, g := range groups {
		body := fmt.Sprintf("%d-%d", g, i)
		if _, err := q.Send(context.Background(), []byte(body), queue.SendOptions{
			Attributes: map[string]string{queue.AttrOrderKey: strconv.Itoa(g)}}); err != nil {
			t.Fatal(err)
		}
	}
	stop := run(t, h)
	eventually(t, "every output", func() bool { return depth(t, h, "acme", "out") == int64(len(groups)) })
	outs := drainBodies(t, h, "acme", "out")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	last := 0
	for _, m := range outs {
		g, err := strconv.Atoi(strings.SplitN(string(m.Body), "-", 2)[0])
		if err != nil {
			t.Fatalf("output %q: %v", m.Body, err)
		}
		if g < last {
			t.Fatalf("output of group %d came after one of group %d", g, last)
		}
		last = g
	}
}
