package host

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/nats/natstest"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/runtime"
)

// natsBackend starts a JetStream server for the test and returns the top of a host config
// naming it as backend "js" (streams in memory, made by the host).
func natsBackend(t *testing.T) string {
	t.Helper()
	_, url := natstest.Server(t)
	return fmt.Sprintf("backends:\n  js:\n    type: nats\n    create_queues: true\n    nats: {urls: [%q], storage: memory, pull_hold: 2s, pull_heartbeat: 500ms}\n", url)
}

// A binding on a nats backend drains its queue through the host: the echo handler refuses
// these bodies (not JSON), so each message is retried up to max_dequeue_count and then
// dead-lettered into the poison stream with its reason, dequeue count, handler version and
// the original's own headers. The CLI's queue operations (peek, list, requeue, purge of dead
// letters) work on JetStream streams as on the other backends; peek and list leave the
// messages in place.
func TestNATSBackendPoisonAndQueueOps(t *testing.T) {
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	top := natsBackend(t)
	h, cfg := newHostWith(t, top, "  acme:\n    bindings:\n      echo:\n        queue: in\n        backend: js\n        module: \""+echo+"\""+fast)
	ctx := context.Background()
	in, closer, err := OpenQueue(ctx, cfg, "acme", "in")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	const n = 5
	for i := range n {
		attrs := map[string]string{"user-key": fmt.Sprintf("v%d", i)}
		if _, err := in.Send(ctx, fmt.Appendf(nil, "m%d", i), queue.SendOptions{Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	dead, dcloser, err := OpenQueue(ctx, cfg, "acme", "in"+queue.PoisonSuffix)
	if err != nil {
		t.Fatal(err)
	}
	defer dcloser.Close()
	stop := run(t, h)
	eventually(t, "every message dead-lettered", func() bool {
		d, err := in.Depth(ctx)
		dd, derr := dead.Depth(ctx)
		return err == nil && derr == nil && d == 0 && dd == n
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var ps []PeekItem
	err = StreamPeek(ctx, cfg, "acme", "in"+queue.PoisonSuffix, 0, 100, func(p PeekItem) error {
		ps = append(ps, p)
		return nil
	})
	if err != nil || len(ps) != n {
		t.Fatalf("peek = %d dead letters, %v; want %d", len(ps), err, n)
	}
	for _, p := range ps {
		a := p.Attributes
		if a[queue.AttrReason] == "" || a[queue.AttrDequeueCount] != "3" || a[queue.AttrHandlerVersion] == "" ||
			a[queue.AttrOriginalQueue] != "acme.in" || a[queue.AttrOriginalID] == "" || a["user-key"] != "v"+string(p.Prefix[1:]) {
			t.Errorf("dead letter %s %q: attributes %v; want reason, dequeue count 3, handler version, original queue and id, and its user-key", p.ID, p.Prefix, a)
		}
	}
	ls, err := ListDeadLetters(ctx, cfg, "acme", "in", 0)
	if err != nil || len(ls) != n {
		t.Fatalf("list = %d, %v; want %d", len(ls), err, n)
	}
	if n, err := RequeueDeadLetters(ctx, cfg, "acme", "in", 1); err != nil || n != 1 {
		t.Fatalf("requeue = %d, %v; want 1", n, err)
	}
	ms, err := in.Receive(ctx, 32, time.Minute)
	if err != nil || len(ms) != 1 || ms[0].Attributes["user-key"] == "" || ms[0].Attributes[queue.AttrReason] != "" {
		t.Fatalf("requeued = %+v, %v; want one message with its own attributes, the dead-letter ones dropped", ms, err)
	}
	if got, err := PurgeDeadLetters(ctx, cfg, "acme", "in", 0); err != nil || got != n-1 {
		t.Fatalf("purge = %d, %v; want %d", got, err, n-1)
	}
	if d, err := dead.Depth(ctx); err != nil || d != 0 {
		t.Fatalf("dead letters after purge = %d, %v; want 0", d, err)
	}
}

// An ordered binding on a nats backend runs group by group: its order keys route to group
// subjects (the config names the queue ordered for every process that opens it), and the
// outputs come out group after group.
func TestNATSOrderedBindingEmitsGroupByGroup(t *testing.T) {
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	top := natsBackend(t)
	h, _ := newHostWith(t, top, fmt.Sprintf(`
  acme:
    bindings:
      steps: {backend: js, queue: in, output: out, module: %q, ordered: true, max_workers: 4, batch_size: 4, pool: {max_instances: 4}, backoff: {min: 5ms, max: 20ms}}
`, echo))
	q, err := h.OpenQueue(context.Background(), "acme", "in")
	if err != nil {
		t.Fatal(err)
	}
	var groups []int
	for g := 1; g <= 3; g++ {
		for range 6 {
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
	if len(outs) != len(groups) {
		t.Fatalf("%d outputs, want %d", len(outs), len(groups))
	}
}

// TestNATSOutputsOfARepeatedMessageSentOnce: a message handled twice (its host died between
// sending its outputs and settling it) sends its outputs to a nats queue once: they are named
// after the message (SendOptions.DedupID), and JetStream drops the repeat. A new message with
// the same id, another insertion time, is not taken for a repeat.
func TestNATSOutputsOfARepeatedMessageSentOnce(t *testing.T) {
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	top := natsBackend(t)
	h, cfg := newHostWith(t, top, "  acme:\n    bindings:\n      echo:\n        queue: in\n        output: out\n        backend: js\n        module: \""+echo+"\""+fast)
	ctx := context.Background()
	var b *binding
	for _, x := range h.binds {
		if x.tenant.name == "acme" && x.name == "echo" {
			b = x
		}
	}
	if b == nil {
		t.Fatal("binding acme/echo not built")
	}
	out, closer, err := OpenQueue(ctx, cfg, "acme", "out")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	m := &queue.Message{ID: "7", InsertedAt: time.Unix(1700000000, 123)}
	outs := []runtime.Emitted{{Queue: "out", Body: []byte("a")}, {Queue: "out", Body: []byte("b")}}
	for range 2 { // handled, the host dies before settling, handled again
		if err := b.sendOutputs(ctx, outs, m); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := out.Depth(ctx); err != nil || d != 2 {
		t.Fatalf("output depth after the message's outputs were sent twice: %d, %v; want 2", d, err)
	}
	reused := &queue.Message{ID: "7", InsertedAt: m.InsertedAt.Add(time.Second)} // a store made anew
	if err := b.sendOutputs(ctx, outs, reused); err != nil {
		t.Fatal(err)
	}
	if err := b.sendOutputs(ctx, outs, nil); err != nil { // a batch call's own outputs: not named
		t.Fatal(err)
	}
	if d, err := out.Depth(ctx); err != nil || d != 6 {
		t.Fatalf("output depth: %d, %v; want 6 (a new message's outputs and unnamed ones are not repeats)", d, err)
	}
}
