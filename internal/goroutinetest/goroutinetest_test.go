package goroutinetest_test

import (
	"sync"
	"testing"

	"github.com/wqhost/wqhost/internal/goroutinetest"
)

//go:noinline
func parked(ready chan<- struct{}, release <-chan struct{}) {
	ready <- struct{}{}
	<-release
}

// Count sees exactly the goroutines blocked in a given function, however many there are
// (3,000 stacks overflow the first buffer).
func TestCountFindsBlockedGoroutines(t *testing.T) {
	const fn = "goroutinetest_test.parked"
	for _, n := range []int{0, 1, 3000} {
		ready, release := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { parked(ready, release) })
			<-ready
		}
		got := goroutinetest.Count(fn)
		close(release)
		wg.Wait()
		if got != n {
			t.Errorf("Count(%q) = %d with %d goroutines blocked there, want %d", fn, got, n, n)
		}
	}
}
