package clocktest

import (
	"testing"
	"time"
)

// A Fake fires an After channel when, and only when, Advance reaches its time; d <= 0 fires at
// once like time.After; Waiters counts the channels still pending.
func TestFakeFiresOnlyWhenAdvanced(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := New(t0)
	select {
	case got := <-c.After(0):
		if !got.Equal(t0) {
			t.Errorf("After(0) delivered %s, want %s", got, t0)
		}
	default:
		t.Fatal("After(0) did not fire at once")
	}
	short, long := c.After(time.Second), c.After(3*time.Second)
	if n := c.Waiters(); n != 2 {
		t.Fatalf("Waiters = %d, want 2", n)
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-short:
		t.Fatal("After(1s) fired 999ms in")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case got := <-short:
		if want := t0.Add(time.Second); !got.Equal(want) {
			t.Errorf("After(1s) delivered %s, want %s", got, want)
		}
	default:
		t.Fatal("After(1s) did not fire once the clock reached it")
	}
	if n := c.Waiters(); n != 1 {
		t.Errorf("Waiters = %d after one fired, want 1", n)
	}
	c.Advance(5 * time.Second)
	select {
	case <-long:
	default:
		t.Fatal("After(3s) did not fire when the clock passed it")
	}
	if got, want := c.Now(), t0.Add(6*time.Second); !got.Equal(want) {
		t.Errorf("Now = %s, want %s", got, want)
	}
	if n := c.Waiters(); n != 0 {
		t.Errorf("Waiters = %d after all fired, want 0", n)
	}
}
