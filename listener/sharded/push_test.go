package sharded

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// TestIdlePushListenerWakesOnShardWrite: an idle push listener on a sharded queue (default
// fallback poll, 5 minutes) takes a new message within a second of fake time, whichever
// shard it lands on: the shards' wake-ups are forwarded, so it does not wait for the poll.
func TestIdlePushListenerWakesOnShardWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := memory.New(memory.Options{})
		var shards []queue.Queue
		for i := range 3 {
			s, err := b.Open(ctx, fmt.Sprintf("jobs-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			shards = append(shards, s)
		}
		q, err := New("jobs", shards, Options{})
		if err != nil {
			t.Fatal(err)
		}
		dead, err := b.Open(ctx, "jobs-poison")
		if err != nil {
			t.Fatal(err)
		}
		l, err := listener.New(listener.Config{
			Queue: q, DeadLetter: dead, Push: true,
			Handler: listener.HandlerFunc(func(context.Context, *queue.Message) error { return nil }),
			Backoff: builtin.NewBackoff(builtin.BackoffOptions{}),
			Scaler:  builtin.NewTarget(0),
			Poison:  builtin.NewPoison(builtin.PoisonOptions{}),
			Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithCancel(ctx)
		wait := l.Start(lctx)
		defer func() {
			cancel()
			if err := wait(); err != nil {
				t.Error(err)
			}
		}()
		time.Sleep(time.Minute) // idle
		synctest.Wait()
		for i, to := range []queue.Queue{q, shards[2], shards[0]} {
			before := l.State().Receives
			if _, err := to.Send(ctx, []byte("m"), queue.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if s := l.State(); s.Processed != uint64(i+1) {
				t.Fatalf("message %d (sent to %s) not taken within 1s of fake time: processed %d, receives %d since the send",
					i+1, to.Name(), s.Processed, s.Receives-before)
			}
			time.Sleep(time.Minute) // idle again
			synctest.Wait()
		}
	})
}
