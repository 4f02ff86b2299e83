// Command noop-go is a wqhost/v1 handler that accepts every message without reading it. It is
// the benchmark twin of Extism's noop plugin (go-sdk wasm/noop.wasm): the cost it measures is
// the host's dispatch and nothing else.
package main

import wqhost "github.com/wqhost/wqhost/sdk/go"

func init() {
	wqhost.Handle(func(*wqhost.Message) wqhost.Result { return wqhost.OK() })
}

// main is never called in a c-shared (reactor) build; the handler is registered in init.
func main() {}
