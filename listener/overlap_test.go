package listener_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/wqhost/wqhost/listener/queue"
)

// heldDeletes is a Queue (no Batcher, no Waiter) whose Deletes wait until release is closed.
type heldDeletes struct {
	queue.Queue
	release chan struct{}
	waiting atomic.Int32
}

func (h *heldDeletes) Delete(ctx context.Context, m *queue.Message) error {
	h.waiting.Add(1)
	<-h.release
	return h.Queue.Delete(ctx, m)
}

// A worker receives its next batch while the deletes of the last one are under way (on the
// local store both then share one commit), yet a message counts as processed only once its
// delete is done, and Run does not return before every delete is.
func TestDeletesOverlapNextReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newMem(t)
		e.send(t, 3)
		q := &heldDeletes{Queue: e.q, release: make(chan struct{})}
		l := start(t, baseConfig(q, e.dl))
		synctest.Wait()
		s := l.State()
		if q.waiting.Load() == 0 {
			t.Fatal("no delete was issued for the handled batch")
		}
		if s.Receives < 2 {
			t.Errorf("%d receives while the first batch's deletes were held, want the next receive issued alongside them", s.Receives)
		}
		if s.Processed != 0 {
			t.Errorf("%d messages counted processed before their deletes were done", s.Processed)
		}
		l.cancel()
		synctest.Wait()
		select {
		case <-l.Done():
			t.Fatal("Run returned with deletes still under way")
		default:
		}
		close(q.release)
		if err := l.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if s := l.State(); s.Processed != 3 {
			t.Errorf("processed %d after shutdown, want 3", s.Processed)
		}
		if n, err := e.q.Depth(context.Background()); err != nil || n != 0 {
			t.Errorf("queue depth %d (%v) after shutdown, want 0", n, err)
		}
	})
}
