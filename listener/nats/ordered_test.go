package nats_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wqhost/wqhost/listener"
	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/nats/natstest"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// Two hosts share an ordered queue (one stream, one consumer per group): groups sent out
// of order, some messages retried once, run group by group across both hosts — no call of
// group N+1 starts before every call of group N ended — and every message is handled to
// completion once. Afterwards the idle hosts are woken by a keyed message another client
// publishes to its group subject, long before their fallback poll.
func TestOrderedGroupsAcrossHosts(t *testing.T) {
	_, url := natstest.Server(t)
	const groups, perGroup = 4, 6
	// Every backend of the test names the same streams: the sender's and both hosts'.
	ordered := func(o *wqnats.Options) {
		o.Ordered = map[string]bool{"work": true}
		o.StreamPrefix, o.SubjectPrefix = "ORD_", "ord."
	}
	sender := open(t, url, ordered)
	ctx := context.Background()
	sq, err := sender.Queue(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		group      int
		start, end time.Time
	}
	var (
		mu     sync.Mutex
		events []event
		calls  = map[string]int{}
		done   = map[string]bool{}
		all    = make(chan struct{})
	)
	rng := rand.New(rand.NewPCG(1, 2))
	var order []int
	for g := 1; g <= groups; g++ {
		for range perGroup {
			order = append(order, g)
		}
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	want := len(order) + 1 // and the wake-up message
	handler := listener.HandlerFunc(func(ctx context.Context, m *queue.Message) error {
		g, _ := strconv.Atoi(m.Attributes[queue.AttrOrderKey])
		start := time.Now()
		time.Sleep(time.Duration(len(m.Body)%3) * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		events = append(events, event{g, start, time.Now()})
		key := string(m.Body)
		calls[key]++
		if calls[key] == 1 && len(key)%4 == 0 {
			return outcome.Retry(5*time.Millisecond, errors.New("once more"))
		}
		if !done[key] {
			done[key] = true
			if len(done) == want {
				close(all)
			}
		}
		return nil
	})
	// Every group is in the stream before a host starts: a group sent later than a higher
	// one started is not held back by it (on any backend).
	for i, g := range order {
		body := fmt.Sprintf("g%d-%0*d", g, 1+i%4, i) // lengths vary: some retried once
		if _, err := sq.Send(ctx, []byte(body), queue.SendOptions{Attributes: map[string]string{queue.AttrOrderKey: strconv.Itoa(g)}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		b := open(t, url, ordered)
		q, err := b.Queue(ctx, "work")
		if err != nil {
			t.Fatal(err)
		}
		dl, err := b.Queue(ctx, "work"+queue.PoisonSuffix)
		if err != nil {
			t.Fatal(err)
		}
		l, err := listener.New(listener.Config{
			Queue: q, Ordered: true, DeadLetter: dl, Handler: handler, Push: true, PushFallbackPoll: time.Hour,
			MaxWorkers: 3, BatchSize: 4, Concurrency: 3,
			Backoff: builtin.NewBackoff(builtin.BackoffOptions{}), Scaler: builtin.NewTarget(0),
			Poison: builtin.NewPoison(builtin.PoisonOptions{BaseDelay: 10 * time.Millisecond}),
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithCancel(ctx)
		wait := l.Start(lctx)
		t.Cleanup(func() { cancel(); _ = wait() })
	}
	// After the drain the hosts are idle; a keyed message from another client wakes them.
	time.AfterFunc(2*time.Second, func() {
		nc, err := natsgo.Connect(url)
		if err != nil {
			return
		}
		defer nc.Close()
		m := natsgo.NewMsg(sq.Subject() + ".o.9")
		m.Header.Set(queue.AttrOrderKey, "9")
		m.Data = []byte("wake")
		_ = nc.PublishMsg(m)
		_ = nc.Flush()
	})
	select {
	case <-all:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d messages handled within 30s", len(done), want)
	}
	mu.Lock()
	defer mu.Unlock()
	first, last := map[int]time.Time{}, map[int]time.Time{}
	for _, e := range events {
		if f, ok := first[e.group]; !ok || e.start.Before(f) {
			first[e.group] = e.start
		}
		if e.end.After(last[e.group]) {
			last[e.group] = e.end
		}
	}
	for g := 2; g <= groups; g++ {
		if !first[g].After(last[g-1]) {
			t.Errorf("group %d started at %s, before group %d's last call ended at %s", g,
				first[g].Format("15:04:05.000000"), g-1, last[g-1].Format("15:04:05.000000"))
		}
	}
	if !done["wake"] {
		t.Error("the keyed message published while idle was not handled")
	}
}

// A group's consumer that the server deleted (an hour unused) is made again by the next
// receives: the group is not stuck behind a consumer that is gone.
func TestOrderedGroupConsumerRecreated(t *testing.T) {
	_, url := natstest.Server(t)
	b := open(t, url, func(o *wqnats.Options) { o.Ordered = map[string]bool{"work": true} })
	ctx := context.Background()
	q, err := b.Queue(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	send := func(body string) {
		t.Helper()
		if _, err := q.Send(ctx, []byte(body), queue.SendOptions{Attributes: map[string]string{queue.AttrOrderKey: "1"}}); err != nil {
			t.Fatal(err)
		}
	}
	receive := func() []*queue.Message {
		t.Helper()
		for range 20 {
			ms, _, err := q.ReceiveOrdered(ctx, queue.MaxBatch, time.Minute, 0)
			if err == nil && len(ms) > 0 {
				return ms
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatal("no message of group 1 received within 20 tries")
		return nil
	}
	send("a")
	for _, m := range receive() {
		if err := q.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, q.Stream(), "wqhost_o1"); err != nil {
		t.Fatalf("delete the group's consumer: %v", err)
	}
	send("b")
	if ms := receive(); string(ms[0].Body) != "b" {
		t.Fatalf("received %q, want b", ms[0].Body)
	}
}
