package nats

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wqhost/wqhost/listener/nats/natstest"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestDeleteBatchRetriesUnconfirmedAcks: the acks of a batch go out together and each must
// be confirmed; one answered "no responders" (a consumer leader lost, none elected yet) is sent
// again while its lease lasts and counts once confirmed; one whose lease ends first fails,
// its lease kept for another try; a stale lease sends nothing. The ack subjects are a
// fake consumer's (fake.ack.<case>), which answers as the test says.
func TestDeleteBatchRetriesUnconfirmedAcks(t *testing.T) {
	_, url := natstest.Server(t)
	ctx := context.Background()
	b, err := Open(ctx, Options{URLs: []string{url}, CreateQueues: true, MemoryStorage: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	q, err := b.Queue(ctx, "settle")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var mu sync.Mutex
	got := map[string]int{}
	noResponders := func(m *natsgo.Msg) {
		_ = m.RespondMsg(&natsgo.Msg{Subject: m.Reply, Header: natsgo.Header{"Status": []string{"503"}}})
	}
	_, err = nc.Subscribe("fake.ack.*", func(m *natsgo.Msg) {
		mu.Lock()
		got[m.Subject]++
		n := got[m.Subject]
		mu.Unlock()
		switch {
		case m.Subject == "fake.ack.retried" && n == 1, m.Subject == "fake.ack.expiring":
			noResponders(m)
		default:
			_ = m.Respond(nil) // the server's confirmation: an empty message
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	now := time.Now()
	cases := []struct {
		id, reply string
		until     time.Time
		stale     bool
		want      error // nil: deleted
	}{
		{"confirmed", "fake.ack.confirmed", now.Add(time.Minute), false, nil},
		{"retried", "fake.ack.retried", now.Add(time.Minute), false, nil},
		{"expiring", "fake.ack.expiring", now.Add(100 * time.Millisecond), false, natsgo.ErrNoResponders},
		{"nobody", "nobody.ack.x", now.Add(100 * time.Millisecond), false, natsgo.ErrNoResponders},
		{"stale", "fake.ack.stale", now.Add(time.Minute), true, queue.ErrLeaseLost},
	}
	var ms []*queue.Message
	q.mu.Lock()
	for _, c := range cases {
		q.leases[c.id] = &lease{reply: c.reply, token: "1.a", until: c.until}
		token := "1.a"
		if c.stale {
			token = "1.b"
		}
		ms = append(ms, &queue.Message{ID: c.id, Queue: q.name, LeaseToken: token})
	}
	q.mu.Unlock()

	errs := q.DeleteBatch(ctx, ms)
	for i, c := range cases {
		if (c.want == nil) != (errs[i] == nil) || (c.want != nil && !errors.Is(errs[i], c.want)) {
			t.Errorf("%s: error %v, want %v", c.id, errs[i], c.want)
		}
		q.mu.Lock()
		_, held := q.leases[c.id]
		q.mu.Unlock()
		if held != (c.want != nil) {
			t.Errorf("%s: lease held %v after the delete, want %v (kept when the ack failed or was refused)", c.id, held, c.want != nil)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for subj, want := range map[string]int{"fake.ack.confirmed": 1, "fake.ack.retried": 2, "fake.ack.expiring": 1, "fake.ack.stale": 0} {
		if got[subj] != want {
			t.Errorf("%s received %d acks, want %d", subj, got[subj], want)
		}
	}
}
