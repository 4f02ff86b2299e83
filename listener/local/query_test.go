package local_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// TestMatchingMovesAndDeletes: DeleteMatching and MoveMatching take only what the match
// selects, leave a message a reader holds leased, leave what arrived after the snapshot
// (MaxID), and a move keeps the body and the attributes less the keys dropped.
func TestMatchingMovesAndDeletes(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{})
	dead, _ := st.Queue(ctx, "jobs-poison")
	dst, _ := st.Queue(ctx, "jobs")
	for i := range 10 {
		reason := "trap"
		if i%2 == 0 {
			reason = "timeout"
		}
		if _, err := dead.Send(ctx, fmt.Appendf(nil, "body %d", i), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: reason, "keep": "k"}}); err != nil {
			t.Fatal(err)
		}
	}
	// A reader holds the first dead letter (a timeout).
	held, err := dead.Receive(ctx, 1, time.Minute)
	if err != nil || len(held) != 1 {
		t.Fatalf("receive: %v %v", held, err)
	}
	snap, err := st.LastID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dead.Send(ctx, []byte("late"), queue.SendOptions{Attributes: map[string]string{queue.AttrReason: "timeout"}}); err != nil {
		t.Fatal(err)
	}
	timeouts := local.Match{Attrs: []local.AttrMatch{{Key: queue.AttrReason, Value: "time", Contains: true}}, MaxID: snap}
	if n, err := dead.Count(ctx, timeouts); err != nil || n != 5 {
		t.Fatalf("count of the timeouts in the snapshot = %d, %v; want 5", n, err)
	}
	var c local.Cursor
	moved := 0
	for {
		found, m, err := dead.MoveMatching(ctx, timeouts, &c, 2, dst, []string{queue.AttrReason})
		if err != nil {
			t.Fatal(err)
		}
		if found == 0 {
			break
		}
		moved += m
	}
	if moved != 4 {
		t.Errorf("moved %d, want 4 (the 5 timeouts of the snapshot less the one held)", moved)
	}
	n := 0
	if _, err := dst.Select(ctx, local.Match{}, local.Page{}, 100, func(r *local.Row) error {
		n++
		if r.Attributes["keep"] != "k" || r.Attributes[queue.AttrReason] != "" || r.Size != int64(len(r.Body)) {
			t.Errorf("moved %s: %q %v", r.ID, r.Body, r.Attributes)
		}
		return nil
	}); err != nil || n != 4 {
		t.Errorf("jobs holds %d, %v; want the 4 moved", n, err)
	}
	var dc local.Cursor
	found, deleted, err := dead.DeleteMatching(ctx, local.Match{Body: []byte("body 3")}, &dc, 100)
	if err != nil || found != 1 || deleted != 1 {
		t.Errorf("delete by body = %d found, %d deleted, %v; want 1, 1", found, deleted, err)
	}
	if n, _ := dead.Count(ctx, local.Match{}); n != 6 {
		t.Errorf("%d dead letters left, want 6 (the held timeout, 4 traps, the late one)", n)
	}
	r, err := dead.Get(ctx, held[0].ID, 3)
	if err != nil || r == nil || string(r.Body) != "bod" || r.Size != 6 {
		t.Errorf("get %s = %+v, %v; want a 3-byte prefix of a 6-byte body", held[0].ID, r, err)
	}
}
