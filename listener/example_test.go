package listener_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// A listener drains a queue of any backend (here the in-memory one) into a handler, with
// the built-in policies; a message whose handler returns nil is deleted.
func ExampleNew() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := memory.New(memory.Options{})
	defer b.Close()
	q, _ := b.Open(ctx, "orders")
	dead, _ := b.Open(ctx, "orders"+queue.PoisonSuffix)
	for _, body := range []string{"a", "b", "c"} {
		if _, err := q.Send(ctx, []byte(body), queue.SendOptions{}); err != nil {
			fmt.Println(err)
			return
		}
	}

	var mu sync.Mutex
	var handled []string
	l, err := listener.New(listener.Config{
		Queue:      q,
		DeadLetter: dead,
		Handler: listener.HandlerFunc(func(ctx context.Context, m *queue.Message) error {
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, strings.ToUpper(string(m.Body)))
			return nil
		}),
		Backoff: builtin.NewBackoff(builtin.BackoffOptions{}),
		Scaler:  builtin.NewTarget(0),
		Poison:  builtin.NewPoison(builtin.PoisonOptions{}),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	wait := l.Start(ctx)
	// Wait (at most 30 s) until every message is handled and deleted, then stop the listener.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(30 * time.Second)
drain:
	for {
		if n, _ := q.Depth(ctx); n == 0 {
			break
		}
		select {
		case <-tick.C:
		case <-giveUp:
			fmt.Println("not drained in 30 s")
			break drain
		}
	}
	cancel()
	if err := wait(); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Println(err)
	}
	mu.Lock()
	slices.Sort(handled)
	fmt.Println(handled)
	mu.Unlock()
	// Output:
	// [A B C]
}
