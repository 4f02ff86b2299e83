// Command echo-go is the minimal wqhost/v1 handler: it emits each message body unchanged to
// the binding's output queue. It is the benchmark fixture, so it does as little as possible.
package main

import wqhost "github.com/wqhost/wqhost/sdk/go"

func init() {
	wqhost.Handle(func(m *wqhost.Message) wqhost.Result {
		if err := wqhost.Emit("", m.Body()); err != nil {
			return wqhost.Retry(0, err)
		}
		return wqhost.OK()
	})
}

// main is never called in a c-shared (reactor) build; the handler is registered in init.
func main() {}
