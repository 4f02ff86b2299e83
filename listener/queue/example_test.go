package queue_test

import (
	"context"
	"fmt"
	"time"

	"github.com/wqhost/wqhost/listener/memory"
	"github.com/wqhost/wqhost/listener/queue"
)

// A queue is used through the contract alone: send, lease a batch, delete what was handled.
// A message leased and not deleted comes back when its lease ends.
func ExampleQueue() {
	ctx := context.Background()
	var b queue.Backend = memory.New(memory.Options{})
	defer b.Close()
	q, err := b.Open(ctx, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, body := range []string{"a", "b"} {
		if _, err := q.Send(ctx, []byte(body), queue.SendOptions{}); err != nil {
			fmt.Println(err)
			return
		}
	}
	ms, err := q.Receive(ctx, queue.MaxBatch, 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range ms {
		fmt.Printf("%s (receive %d)\n", m.Body, m.DequeueCount)
		if err := q.Delete(ctx, m); err != nil {
			fmt.Println(err)
		}
	}
	n, _ := q.Depth(ctx)
	fmt.Println("left:", n)
	// Output:
	// a (receive 1)
	// b (receive 1)
	// left: 0
}
