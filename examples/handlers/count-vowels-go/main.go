// Command count-vowels-go is a wqhost/v1 handler with the logic of Extism's count_vowels
// plugin (go-sdk wasm/count_vowels.wasm), so the benchmarks compare the same work: it counts
// the characters of the body found in the binding's "vowels" config (default aeiouAEIOU),
// keeps a running total in the instance (as the plugin does with an Extism var), and emits
// {"count":N,"total":N,"vowels":"..."} to the binding's output queue.
package main

import (
	wqhost "github.com/wqhost/wqhost/sdk/go"
)

func init() {
	wqhost.Handle(handle)
}

// total lives as long as the instance, like the plugin's "total" var.
var total int

func handle(m *wqhost.Message) wqhost.Result {
	vowels, ok := wqhost.Config("vowels")
	if !ok {
		vowels = defaultVowels
	}
	n := countVowels(m.Body(), vowels)
	total += n
	if err := wqhost.Emit("", appendResult(nil, n, total, vowels)); err != nil {
		return wqhost.Retry(0, err)
	}
	return wqhost.OK()
}

// main is never called in a c-shared (reactor) build; the handler is registered in init.
func main() {}
