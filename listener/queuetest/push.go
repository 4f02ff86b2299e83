package queuetest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/queue"
)

// testPushListenerNoLostWakeUp: an idle push listener is woken by the queue alone (no Notify,
// the fallback poll an hour off) for each of n messages, each sent the moment the last one
// was handled, racing the listener's empty receive and its going idle (registering its
// wake-up). A write that lands between the registration and the visibility read must still
// wake it, or the message waits for lostWakeUp and the test fails.
func testPushListenerNoLostWakeUp(t *testing.T, b queue.Backend, _ func(time.Duration)) {
	q := open(t, b, "push-race")
	const n = 200
	handled := make(chan struct{}, n)
	l, err := listener.New(listener.Config{
		Queue: q, DeadLetter: open(t, b, "push-race"+queue.PoisonSuffix),
		Handler: listener.HandlerFunc(func(context.Context, *queue.Message) error {
			handled <- struct{}{}
			return nil
		}),
		Push: true, PushFallbackPoll: time.Hour, MinWorkers: 1, MaxWorkers: 1,
		Backoff: idleBackoff{}, Scaler: depthScaler{}, Poison: retryPoison{delay: time.Second},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait := l.Start(ctx)
	defer func() {
		cancel()
		if err := wait(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	for i := range n {
		send(t, q, []byte("m"), queue.SendOptions{})
		select {
		case <-handled:
		case <-time.After(lostWakeUp):
			t.Fatalf("lost wake-up: message %d of %d not handled within %s of its send (state %+v)", i+1, n, lostWakeUp, l.State())
		}
	}
}
