package azure

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// syncBuffer is a log sink safe for the timer goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(substr string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), substr)
}

// TestStallLoggedOncePerStall, on a fake clock: a storage call that hangs for 20 s logs one
// line naming the queue and the call once it has waited stallAfter, and one when storage
// answers; calls that stall meanwhile add nothing, a quick call logs nothing, and the next
// stall logs again.
func TestStallLoggedOncePerStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		q := &Queue{name: "4-acme-orders", b: &Backend{log: slog.New(slog.NewTextHandler(&logs, nil))}}
		const stalledLine, recoveredLine = "storage call stalled", "storage recovered from a stall"

		quick := q.watchStall("delete")
		time.Sleep(50 * time.Millisecond)
		quick(nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := logs.lines("msg="); n != 0 {
			t.Fatalf("a 50ms call logged %d lines:\n%s", n, logs.b.String())
		}

		receive := q.watchStall("receive from") // storage freezes for 20 s
		time.Sleep(stallAfter - time.Millisecond)
		synctest.Wait()
		if n := logs.lines(stalledLine); n != 0 {
			t.Fatalf("stall logged before %s", stallAfter)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		renew := q.watchStall("update visibility of") // a second call stalls too
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if n := logs.lines(stalledLine); n != 1 {
			t.Fatalf("%d stall lines for one stall, want 1:\n%s", n, logs.b.String())
		}
		for _, want := range []string{"queue=4-acme-orders", `call="receive from"`, "waiting=5s"} {
			if logs.lines(want) != 1 {
				t.Errorf("stall line lacks %s:\n%s", want, logs.b.String())
			}
		}
		receive(nil)
		synctest.Wait()
		if n := logs.lines(recoveredLine); n != 0 {
			t.Fatalf("recovery logged while a call is still stalled:\n%s", logs.b.String())
		}
		renew(errors.New("timeout"))
		if n := logs.lines(recoveredLine); n != 1 || logs.lines("stalled_for=20.001s") != 1 {
			t.Fatalf("want one recovery line with stalled_for=20.001s:\n%s", logs.b.String())
		}

		again := q.watchStall("send to")
		time.Sleep(6 * time.Second)
		synctest.Wait()
		again(nil)
		if logs.lines(stalledLine) != 2 || logs.lines(recoveredLine) != 2 {
			t.Fatalf("a second stall: want a second pair of lines:\n%s", logs.b.String())
		}
	})
}
