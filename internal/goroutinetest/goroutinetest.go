// Package goroutinetest counts goroutines by the code they run, for tests that bound what an
// idle component holds.
package goroutinetest

import (
	"runtime"
	"strings"
)

// Count returns the number of goroutines whose stack trace contains fn (a function's
// qualified name, or a prefix of it such as "wqhost/listener.(*Listener).").
func Count(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf)) // truncated: every goroutine must be seen
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}
