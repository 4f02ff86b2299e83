package wake

import "testing"

// A Fire closes the channel handed out before it and calls each func registered before it
// once, except those stopped; waiters after it wait for the next Fire.
func TestFireWakesThoseBeforeIt(t *testing.T) {
	var s Set
	ch := s.Chan()
	var a, b, c int
	s.Func(func() { a++ })
	stopB := s.Func(func() { b++ })
	stopB()
	s.Fire()
	select {
	case <-ch:
	default:
		t.Fatal("Fire did not close the channel handed out before it")
	}
	later := s.Chan()
	s.Func(func() { c++ })
	if a != 1 || b != 0 || c != 0 {
		t.Fatalf("after one Fire: calls a=%d b=%d (stopped) c=%d (registered after), want 1 0 0", a, b, c)
	}
	select {
	case <-later:
		t.Fatal("the channel handed out after a Fire is already closed")
	default:
	}
	s.Fire()
	if a != 1 || c != 1 {
		t.Fatalf("after a second Fire: calls a=%d c=%d, want 1 1 (each func once)", a, c)
	}
}
