// Command count-vowels-perchar-go is count-vowels-go's handler with the algorithm of Extism's
// count_vowels plugin (go-sdk wasm/count_vowels.wasm) kept as it is: every character of the
// body is tested against the binding's "vowels" config (default aeiouAEIOU) by scanning that
// string, with no table prepared beforehand. It emits the same bytes as count-vowels-go,
// {"count":N,"total":N,"vowels":"..."}, with the same running total.
//
// It exists so that the benchmarks can compare the same algorithm across languages (Extism's
// Rust plugin, this source built by Go and by TinyGo, count-vowels-rust) and so the time
// limit's cost is measured on an ordinary byte loop; count-vowels-go is the optimised
// handler written the way docs/handlers.md advises.
package main

import (
	"strconv"

	wqhost "github.com/wqhost/wqhost/sdk/go"
)

const defaultVowels = "aeiouAEIOU"

func init() {
	wqhost.Handle(handle)
}

var (
	// total lives as long as the instance, like the plugin's "total" var.
	total int
	// out is the output buffer, reused by every message (Emit copies it).
	out []byte
)

func handle(m *wqhost.Message) wqhost.Result {
	vowels, ok := wqhost.Config("vowels")
	if !ok {
		vowels = defaultVowels
	}
	n := count(m.Body(), vowels)
	total += n
	out = appendResult(out[:0], vowels, n, total)
	if err := wqhost.Emit("", out); err != nil {
		return wqhost.Retry(0, err)
	}
	return wqhost.OK()
}

// appendResult writes the plugin's output object, field for field, without reflection.
func appendResult(dst []byte, vowels string, count, total int) []byte {
	dst = append(dst, `{"count":`...)
	dst = strconv.AppendInt(dst, int64(count), 10)
	dst = append(dst, `,"total":`...)
	dst = strconv.AppendInt(dst, int64(total), 10)
	dst = append(dst, `,"vowels":`...)
	dst = strconv.AppendQuote(dst, vowels)
	return append(dst, '}')
}

// main is never called in a c-shared (reactor) build; the handler is registered in init.
func main() {}
