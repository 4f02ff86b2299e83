package local_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener/local"
	"github.com/wqhost/wqhost/listener/queue"
)

// leasedOne opens a store on the real clock with one message in queue jobs, leased for a
// minute.
func leasedOne(t *testing.T) (*local.Queue, []*queue.Message) {
	t.Helper()
	ctx := context.Background()
	b := openStore(t, filepath.Join(t.TempDir(), "q.db"), local.Options{})
	q, err := b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send(ctx, []byte("x"), queue.SendOptions{}); err != nil {
		t.Fatal(err)
	}
	ms, err := q.Receive(ctx, 1, time.Minute)
	if err != nil || len(ms) != 1 {
		t.Fatalf("receive: %v %d", err, len(ms))
	}
	return q, ms
}

// A Wait that is woken by a write which makes no message visible yet (a leased message
// released for a retry 50 ms later) keeps waiting until the message is visible: the
// receive after it finds the message. Returning at the write made a listener count an
// empty receive as a spurious wake-up and back off for its whole idle minimum (30 s in
// cmd/wqhost's TestRetryAndPoisonEndToEnd, which then timed out).
func TestWaitWokenByDelayedReleaseWaitsForVisibility(t *testing.T) {
	ctx := context.Background()
	q, ms := leasedOne(t)
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

// Watch, the listener's channel form of Wait, tells a leased message from a visible one and
// follows a release: a message leased for a minute is due in at most a minute; releasing it
// for a retry 50 ms later closes the channel of the Watch taken before, and the next Watch
// shows it due within those 50 ms (not visible at once: a listener woken then would count an
// empty receive as a spurious wake-up); once that time has passed it is visible and received.
func TestWatchFollowsDelayedRelease(t *testing.T) {
	ctx := context.Background()
	q, ms := leasedOne(t)
	watch := func() (<-chan struct{}, time.Duration) {
		t.Helper()
		ch, in, stop, err := q.Watch(ctx)
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		t.Cleanup(stop)
		return ch, in
	}
	ch, in := watch()
	if in <= 0 || in > time.Minute {
		t.Fatalf("Watch with the only message leased for a minute: visibleIn %s, want in (0, 1m]", in)
	}
	const delay = 50 * time.Millisecond
	if err := q.UpdateVisibility(ctx, ms[0], delay); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(30 * time.Second): // only a lost wake-up gets here
		t.Fatal("a release did not close the channel of a Watch taken before it")
	}
	if _, in = watch(); in <= 0 || in > delay {
		t.Fatalf("Watch after a release for %s: visibleIn %s, want in (0, %s]", delay, in, delay)
	}
	time.Sleep(in + time.Millisecond)
	if _, in = watch(); in != 0 {
		t.Fatalf("Watch once the release's delay passed: visibleIn %s, want 0", in)
	}
	if got, err := q.Receive(ctx, 1, time.Minute); err != nil || len(got) != 1 {
		t.Fatalf("receive after the release's delay: %d messages, %v; want 1", len(got), err)
	}
}

// Closing the store closes the channel of a Watch waiting on it, and a Watch after that
// fails with ErrClosed: a listener waiting on the channel then receives, and meets the error.
func TestCloseEndsWatch(t *testing.T) {
	ctx := context.Background()
	b, err := local.Open(ctx, filepath.Join(t.TempDir(), "q.db"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.Queue(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	ch, _, stop, err := q.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("Close did not close the channel of a Watch")
	}
	if _, _, _, err := q.Watch(ctx); !errors.Is(err, local.ErrClosed) {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}
}
