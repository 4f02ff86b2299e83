package nats_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/nats/natstest"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/listener/queuetest"
)

var prefix atomic.Int64

// open returns a backend on url whose streams no other test uses.
func open(t testing.TB, url string, mod func(*wqnats.Options)) *wqnats.Backend {
	t.Helper()
	n := prefix.Add(1)
	opts := wqnats.Options{URLs: []string{url}, CreateQueues: true, StreamPrefix: fmt.Sprintf("T%d_", n),
		SubjectPrefix: fmt.Sprintf("t%d.", n), MemoryStorage: true}
	if mod != nil {
		mod(&opts)
	}
	b, err := wqnats.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	_, url := natstest.Server(t)
	queuetest.Run(t, queuetest.Suite{Name: "nats", New: func(t *testing.T) (queue.Backend, func(time.Duration)) {
		return open(t, url, func(o *wqnats.Options) {
			// The suite's ordered cases, and the probe that reads the capabilities.
			o.Ordered = map[string]bool{"probe": true, "ordered": true, "ordered-big": true}
		}), nil
	}})
}

// Interop: a message published by another program with the official client (headers and a
// binary body) is received with its body and headers as attributes, byte for byte; a message
// sent by the backend reads back through the official client with its attributes as headers.
func TestInteropWithOfficialClient(t *testing.T) {
	_, url := natstest.Server(t)
	b := open(t, url, nil)
	ctx := context.Background()
	q, err := b.Queue(ctx, "interop")
	if err != nil {
		t.Fatal(err)
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
	body := []byte{0, 1, 2, 0xff, '\r', '\n', 'x'}
	in := natsgo.NewMsg(q.Subject())
	in.Data = body
	in.Header.Set("Content-Type", "application/octet-stream")
	in.Header.Set("trace-id", "abc 123")
	if _, err := js.PublishMsg(ctx, in); err != nil {
		t.Fatal(err)
	}
	m := receiveOne(t, q)
	if !bytes.Equal(m.Body, body) || len(m.Attributes) != 2 || m.Attributes["Content-Type"] != "application/octet-stream" || m.Attributes["trace-id"] != "abc 123" {
		t.Fatalf("received %q %v; want %q and the two headers exactly", m.Body, m.Attributes, body)
	}
	if err := q.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}

	id, err := q.Send(ctx, body, queue.SendOptions{Attributes: map[string]string{"k": "v", queue.AttrReason: "two\nlines"}})
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := strconv.ParseUint(id, 10, 64)
	s, err := js.Stream(ctx, q.Stream())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetMsg(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw.Data, body) || raw.Header.Get("k") != "v" || raw.Subject != q.Subject() {
		t.Fatalf("official client read %q %v on %s; want %q with header k: v on %s", raw.Data, raw.Header, raw.Subject, body, q.Subject())
	}
}

func receiveOne(t *testing.T, q queue.Queue) *queue.Message {
	t.Helper()
	for range 50 {
		ms, err := q.Receive(context.Background(), 1, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 1 {
			return ms[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no message received within 50 tries")
	return nil
}

// An idle watched queue sends nothing but its held pull, re-armed once per PullHold; a
// message published by another program wakes it through that pull.
func TestIdleSendsOnlyTheHeldPull(t *testing.T) {
	_, url := natstest.Server(t)
	b := open(t, url, func(o *wqnats.Options) { o.PullHold, o.PullHeartbeat = 500*time.Millisecond, 100*time.Millisecond })
	ctx := context.Background()
	q, err := b.Queue(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	before, pulls := b.Conn().Stats().OutMsgs, q.HeldPulls()
	ch, in, stop, err := q.Watch(ctx)
	if err != nil || in != -1 {
		t.Fatalf("Watch on an empty queue = %s, %v; want -1", in, err)
	}
	defer stop()
	time.Sleep(2 * time.Second)
	sent, held := b.Conn().Stats().OutMsgs-before, q.HeldPulls()-pulls
	if held < 1 || held > 8 {
		t.Fatalf("%d held pulls in 2s with a 500ms hold; want about 4", held)
	}
	if sent != uint64(held) {
		t.Fatalf("idle for 2s the client sent %d messages for %d held pulls; want nothing else", sent, held)
	}
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish(q.Subject(), []byte("wake")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("a message published by another client did not wake the watch")
	}
	if m := receiveOne(t, q); string(m.Body) != "wake" {
		t.Fatalf("received %q, want wake", m.Body)
	}
}

// MaxMessageBytes is the server's max payload less the room kept for headers, and Send
// refuses a body above it naming the limit.
func TestMaxMessageBytes(t *testing.T) {
	_, url := natstest.Server(t)
	b := open(t, url, nil)
	q, err := b.Queue(context.Background(), "big")
	if err != nil {
		t.Fatal(err)
	}
	max := q.MaxMessageBytes()
	if want := int(b.Conn().MaxPayload()) - 8<<10; max != want {
		t.Fatalf("MaxMessageBytes = %d, want %d", max, want)
	}
	if _, err := q.Send(context.Background(), make([]byte, max), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: strings.Repeat("r", 4000)}}); err != nil {
		t.Fatalf("Send of %d bytes with 4 KB of attributes: %v", max, err)
	}
	if _, err := q.Send(context.Background(), make([]byte, max+1), queue.SendOptions{}); err == nil || !strings.Contains(err.Error(), strconv.Itoa(max)) {
		t.Fatalf("Send of %d bytes = %v; want an error naming the limit %d", max+1, err, max)
	}
}

// A message that reaches a pull held longer than AckWait is handed out by the next receive:
// its lease began when it arrived, not when the pull was asked for.
func TestHeldPullLongerThanAckWait(t *testing.T) {
	_, url := natstest.Server(t)
	b := open(t, url, func(o *wqnats.Options) {
		o.AckWait, o.PullHold, o.PullHeartbeat = time.Second, 5*time.Second, time.Second
	})
	ctx := context.Background()
	q, err := b.Queue(ctx, "long-hold")
	if err != nil {
		t.Fatal(err)
	}
	ch, _, stop, err := q.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	time.Sleep(1500 * time.Millisecond) // the pull is held past AckWait
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Publish(q.Subject(), []byte("late")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the publish did not wake the watch")
	}
	ms, err := q.Receive(ctx, 1, time.Second)
	if err != nil || len(ms) != 1 || string(ms[0].Body) != "late" || ms[0].DequeueCount != 1 {
		t.Fatalf("receive after the wake-up = %v, %v; want the message at once, first delivery", ms, err)
	}
	if err := q.Delete(ctx, ms[0]); err != nil {
		t.Fatal(err)
	}
}
