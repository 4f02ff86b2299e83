// Command count-vowels-go is a wqhost/v1 handler with the logic of Extism's count_vowels
// plugin (go-sdk wasm/count_vowels.wasm), so the benchmarks compare the same work: it counts
// the characters of the body found in the binding's "vowels" config (default aeiouAEIOU),
// keeps a running total in the instance (as the plugin does with an Extism var), and emits
// {"count":N,"total":N,"vowels":"..."} to the binding's output queue.
//
// It is written the way docs/handlers.md advises for standard Go: work that depends only on
// config is done once per instance, the inner loop makes no calls, and a message allocates
// nothing (the output buffer is reused: Emit copies it).
package main

import (
	wqhost "github.com/wqhost/wqhost/sdk/go"
)

func init() {
	wqhost.Handle(handle)
}

var (
	// total lives as long as the instance, like the plugin's "total" var.
	total int
	// set is built on the first message, from config that is fixed for the instance's life.
	set *vowelSet
	// out is the output buffer, reused by every message.
	out []byte
)

func handle(m *wqhost.Message) wqhost.Result {
	if set == nil {
		vowels, ok := wqhost.Config("vowels")
		if !ok {
			vowels = defaultVowels
		}
		set = newVowelSet(vowels)
	}
	n := set.count(m.Body())
	total += n
	out = set.appendResult(out[:0], n, total)
	if err := wqhost.Emit("", out); err != nil {
		return wqhost.Retry(0, err)
	}
	return wqhost.OK()
}

// main is never called in a c-shared (reactor) build; the handler is registered in init.
func main() {}
