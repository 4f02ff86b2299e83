package nats_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	wqnats "github.com/wqhost/wqhost/listener/nats"
	"github.com/wqhost/wqhost/listener/nats/natstest"
	"github.com/wqhost/wqhost/listener/queue"
)

// receiveHead leases the head of the lowest order group of q within 10 s.
func receiveHead(t *testing.T, q *wqnats.Queue) *queue.Message {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ms, _, err := q.ReceiveOrdered(context.Background(), 1, time.Minute, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 1 {
			return ms[0]
		}
	}
	t.Fatal("no ordered message within 10s")
	return nil
}

// releasedKey reads the release count of message id of q from outside, as another program
// would: the key's value, or "" when the key is gone.
func releasedKey(t *testing.T, js jetstream.JetStream, q *wqnats.Queue, id string) string {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, q.Stream()+"_released")
	if err != nil {
		t.Fatalf("bucket %s_released: %v", q.Stream(), err)
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value())
}

func jsOf(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := natsgo.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestOrderedReleaseKeepsDequeueCount: on an ordered queue a message released unstarted is
// Nak'ed (it keeps its place at the head of its group) and its release counted in the
// stream's <stream>_released bucket, shared by the hosts reading the queue: released by one
// host and received by another, it still shows DequeueCount 1 (before, 2 after one release:
// with max_dequeue_count 2 it was dead-lettered after one failure). A real retry counts;
// the ack deletes the key.
func TestOrderedReleaseKeepsDequeueCount(t *testing.T) {
	_, url := natstest.Server(t)
	shared := func(o *wqnats.Options) {
		o.Ordered = map[string]bool{"work": true}
		o.StreamPrefix, o.SubjectPrefix = "REL_", "rel."
	}
	ctx := context.Background()
	hosts := make([]*wqnats.Queue, 2)
	first := open(t, url, shared)
	for i := range hosts {
		b := first
		if i > 0 {
			b = open(t, url, shared)
		}
		q, err := b.Queue(ctx, "work")
		if err != nil {
			t.Fatal(err)
		}
		hosts[i] = q
	}
	for _, body := range []string{"first", "second"} {
		if _, err := hosts[0].Send(ctx, []byte(body), queue.SendOptions{Attributes: map[string]string{queue.AttrOrderKey: "1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := queue.As[queue.Releaser](hosts[0]); !ok {
		t.Fatal("an ordered nats queue is no Releaser: its releases raise NumDelivered")
	}
	m := receiveHead(t, hosts[0])
	for i := range 3 {
		r, _ := queue.As[queue.Releaser](hosts[i%2])
		if err := r.Release(ctx, m); err != nil {
			t.Fatalf("Release %d: %v", i+1, err)
		}
		m = receiveHead(t, hosts[(i+1)%2])
		if string(m.Body) != "first" || m.DequeueCount != 1 {
			t.Fatalf("after release %d: %q with DequeueCount %d; want the group's head \"first\" with 1", i+1, m.Body, m.DequeueCount)
		}
	}
	js := jsOf(t, url)
	if v := releasedKey(t, js, hosts[1], m.ID); !strings.HasPrefix(v, "3 ") {
		t.Fatalf("release count of %s = %q, want 3 releases", m.ID, v)
	}
	q := hosts[1] // holds the lease of the third receive
	if err := q.UpdateVisibility(ctx, m, 0); err != nil {
		t.Fatal(err)
	}
	if m = receiveHead(t, hosts[0]); string(m.Body) != "first" || m.DequeueCount != 2 {
		t.Fatalf("after a retry: %q with DequeueCount %d, want \"first\" with 2 (a failure counts)", m.Body, m.DequeueCount)
	}
	if errs := hosts[0].DeleteBatch(ctx, []*queue.Message{m}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if v := releasedKey(t, js, q, m.ID); v != "" {
		t.Fatalf("release count of %s after its ack = %q, want the key gone", m.ID, v)
	}
	if m = receiveHead(t, hosts[1]); string(m.Body) != "second" || m.DequeueCount != 1 {
		t.Fatalf("next: %q with DequeueCount %d, want \"second\" with 1", m.Body, m.DequeueCount)
	}
	// A dead letter deletes the key too.
	if err := hosts[1].Release(ctx, m); err != nil {
		t.Fatal(err)
	}
	if m = receiveHead(t, hosts[0]); m.DequeueCount != 1 || releasedKey(t, js, q, m.ID) == "" {
		t.Fatalf("second after a release: DequeueCount %d, want 1 and its release counted", m.DequeueCount)
	}
	dl, err := first.Queue(ctx, "work"+queue.PoisonSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if err := hosts[0].MoveTo(ctx, m, dl, m.Body, queue.SendOptions{Attributes: map[string]string{queue.AttrReason: "test"}}); err != nil {
		t.Fatal(err)
	}
	if v := releasedKey(t, js, q, m.ID); v != "" {
		t.Fatalf("release count of %s after its dead letter = %q, want the key gone", m.ID, v)
	}
}

// warnings collects the messages of the warnings a backend logs.
type warnings struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *warnings) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *warnings) count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Count(w.buf.String(), s)
}

// TestOrderedReleaseWithoutBucket: when the bucket of release counts fails (here deleted and
// its stream name taken by a stream that is no bucket, so every use of it fails), a release
// is a plain Nak: it returns no error, the message comes back at the head of its group with
// its count raised (NumDelivered, as before the bucket), and it is not lost; the failure is
// logged once.
func TestOrderedReleaseWithoutBucket(t *testing.T) {
	_, url := natstest.Server(t)
	var w warnings
	b := open(t, url, func(o *wqnats.Options) {
		o.Ordered = map[string]bool{"work": true}
		o.Logger = slog.New(slog.NewTextHandler(&w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	ctx := context.Background()
	q, err := b.Queue(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send(ctx, []byte("only"), queue.SendOptions{Attributes: map[string]string{queue.AttrOrderKey: "7"}}); err != nil {
		t.Fatal(err)
	}
	m := receiveHead(t, q)
	if err := q.Release(ctx, m); err != nil {
		t.Fatal(err)
	}
	if m = receiveHead(t, q); m.DequeueCount != 1 {
		t.Fatalf("after a release with the bucket: DequeueCount %d, want 1", m.DequeueCount)
	}
	js := jsOf(t, url)
	bucket := q.Stream() + "_released"
	if err := js.DeleteKeyValue(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KV_" + bucket, Subjects: []string{"not.a.bucket"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	// Delivered twice so far, once released with the bucket: each release now counts, and
	// the receives cannot read the one counted before either.
	for delivered := 3; delivered <= 5; delivered++ {
		if err := q.Release(ctx, m); err != nil {
			t.Fatalf("Release without the bucket: %v, want a plain Nak", err)
		}
		m = receiveHead(t, q)
		if string(m.Body) != "only" || m.DequeueCount != delivered {
			t.Fatalf("after a release without the bucket: %q with DequeueCount %d, want \"only\" with %d (NumDelivered)", m.Body, m.DequeueCount, delivered)
		}
	}
	if err := q.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Depth(ctx); err != nil || d != 0 {
		t.Fatalf("depth after the delete = %d, %v; want 0", d, err)
	}
	if n := w.count("release counts unavailable"); n != 1 {
		t.Fatalf("%d warnings about the bucket, want 1:\n%s", n, &w.buf)
	}
}
