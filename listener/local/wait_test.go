package local_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/local"
)

// A Wait that is woken by a write which makes no message visible yet (a leased message
// released for a retry 50 ms later) keeps waiting until the message is visible: the
// receive after it finds the message. Returning at the write made a listener count an
// empty receive as a spurious wake-up and back off for its whole idle minimum (30 s in
// cmd/wqhost's TestRetryAndPoisonEndToEnd, which then timed out).
func TestWaitWokenByDelayedReleaseWaitsForVisibility(t *testing.T) {
	ctx := context.Background()
	b := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{})
	q, err := b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send(ctx, []byte("x"), listener.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	ms, err := q.Receive(ctx, 1, time.Minute)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v %d", err, len(ms))
	}
	const delay = 50 * time.Millisecond
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(20 * time.Millisecond) // Wait is blocked on the minute-long lease by now
		at := time.Now()
		if err := q.UpdateVisibility(ctx, ms[0], delay); err != nil {
			t.Error(err)
		}
		released <- at
	}()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // only a lost wake-up gets here
	defer cancel()
	if err := q.Wait(wctx, 0); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	at := <-released
	got, err := q.Receive(ctx, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("Wait returned %s after the release, before the message was visible (%s): the receive found nothing", time.Since(at), delay)
	}
}
