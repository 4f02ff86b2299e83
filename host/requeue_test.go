package host

import (
	"context"
	"testing"
	"time"

	"github.com/wqhost/wqhost/host/config"
	"github.com/wqhost/wqhost/listener/queue"
)

// deadLettersOf makes a host with tenant acme's binding on queue in and puts one dead letter
// in in-poison for each original message id in origs, in order; the queue it returns is
// that poison queue.
func deadLettersOf(t *testing.T, origs ...string) (*config.Config, queue.Queue) {
	t.Helper()
	echo := abs(t, "../examples/handlers/echo-rust/echo-rust.wasm")
	_, cfg := newHost(t, "  acme:\n    bindings:\n      echo: {queue: in, module: \""+echo+"\"}\n")
	ctx := context.Background()
	dead, closer, err := OpenQueue(ctx, cfg, "acme", "in"+queue.PoisonSuffix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	for _, orig := range origs {
		attrs := map[string]string{queue.AttrOriginalID: orig, queue.AttrReason: "rejected"}
		if _, err := dead.Send(ctx, []byte("m"+orig), queue.SendOptions{Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
	}
	return cfg, dead
}

// Repeats of one original id in a poison queue (on Azure a message can be dead-lettered by
// a listener whose lease ran out before its delete, and again by the one that got the
// redelivery) are requeued once; the repeats are only deleted.
func TestRequeueTreatsRepeatsOfOneOriginalAsOne(t *testing.T) {
	cfg, dead := deadLettersOf(t, "7", "7", "8")
	ctx := context.Background()
	n, err := RequeueDeadLetters(ctx, cfg, "acme", "in", 0)
	if err != nil || n != 3 {
		t.Fatalf("requeue = %d, %v; want 3 dead letters taken", n, err)
	}
	q, qcloser, err := OpenQueue(ctx, cfg, "acme", "in")
	if err != nil {
		t.Fatal(err)
	}
	defer qcloser.Close()
	ms, err := q.Receive(ctx, 32, time.Minute)
	if err != nil || len(ms) != 2 {
		t.Fatalf("requeued %d messages, %v; want 2 (original 7 once, 8 once)", len(ms), err)
	}
	if d, _ := dead.Depth(ctx); d != 0 {
		t.Errorf("%d dead letters left, want 0", d)
	}
}

// Listing shows repeats of one original id as one dead letter with its repeat count.
func TestListTreatsRepeatsOfOneOriginalAsOne(t *testing.T) {
	cfg, dead := deadLettersOf(t, "7", "7", "7", "8")
	ctx := context.Background()
	ls, err := ListDeadLetters(ctx, cfg, "acme", "in", 0)
	if err != nil || len(ls) != 2 {
		t.Fatalf("list = %d entries, %v; want 2 (original 7 and 8)", len(ls), err)
	}
	repeats := map[string]int{}
	for _, d := range ls {
		repeats[d.OriginalID] = d.Repeats
	}
	if repeats["7"] != 2 || repeats["8"] != 0 {
		t.Errorf("repeats = %v, want 7:2 8:0", repeats)
	}
	if d, _ := dead.Depth(ctx); d != 4 {
		t.Errorf("%d dead letters after listing, want all 4 still there", d)
	}
}
