package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wqhost/wqhost/listener"
	"github.com/wqhost/wqhost/listener/outcome"
	"github.com/wqhost/wqhost/listener/queue"
	"github.com/wqhost/wqhost/plugins/builtin"
)

// The built-in poison policy answers a failed message's outcome with another: retry with a
// doubling delay, then dead-letter once the message reaches the binding's MaxDequeueCount. A
// handler's rejection dead-letters at once. (Jitter is off here so the delays print exactly.)
func ExampleNewPoison() {
	p := builtin.NewPoison(builtin.PoisonOptions{BaseDelay: time.Second, Jitter: -1})
	failed := outcome.Failed(errors.New("downstream unavailable"))
	for count := 1; count <= 4; count++ {
		o := p.Decide(context.Background(), listener.Failure{
			Message:         &queue.Message{ID: "m1", DequeueCount: count},
			Outcome:         failed,
			MaxDequeueCount: 4,
		})
		fmt.Printf("failure %d: %s %s\n", count, o.Kind, o.After)
	}
	o := p.Decide(context.Background(), listener.Failure{
		Message:         &queue.Message{ID: "m2", DequeueCount: 1},
		Outcome:         outcome.Rejected(errors.New("not JSON")),
		MaxDequeueCount: 4,
	})
	fmt.Printf("rejected: %s %q\n", o.Kind, o.Reason())
	// Output:
	// failure 1: retry 1s
	// failure 2: retry 2s
	// failure 3: retry 4s
	// failure 4: reject 0s
	// rejected: reject "rejected: not JSON"
}
