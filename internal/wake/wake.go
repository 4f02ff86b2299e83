// Package wake is the one mechanism by which a queue backend tells its idle waiters that it
// was written to: a channel closed by the next write, for a waiter in a select, and
// callbacks run by the next write, for a waiter that keeps no goroutine while it waits.
package wake

import "sync"

// Set holds the waiters of one queue until its next write. The zero value is ready to use.
type Set struct {
	mu   sync.Mutex
	ch   chan struct{} // nil until a waiter asks for it: a write nobody waits on allocates nothing
	fns  map[uint64]func()
	next uint64
}

// Chan returns a channel that the next Fire closes.
func (s *Set) Chan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Func registers fn to be called once, by the next Fire. stop removes it if it has not been
// called; it may be called any number of times. fn runs in the goroutine that calls Fire,
// maybe under the queue's own lock: it must not block nor call the queue.
func (s *Set) Func(fn func()) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fns == nil {
		s.fns = map[uint64]func(){}
	}
	id := s.next
	s.next++
	s.fns[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.fns, id)
		s.mu.Unlock()
	}
}

// Fire wakes every waiter: it closes the channel Chan handed out and calls the registered
// funcs, each once.
func (s *Set) Fire() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	fns := s.fns
	s.fns = nil
	s.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
