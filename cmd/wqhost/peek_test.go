package main

import (
	"strings"
	"testing"
)

// TestPeekCommand: peek shows a queue's messages escaped for the terminal and leaves them there.
func TestPeekCommand(t *testing.T) {
	dir := t.TempDir()
	wq(t, dir, "send", "--queue", "jobs-done", "plain").expect(t, 0, "send")
	wq(t, dir, "send", "--queue", "jobs-done", "evil\x1b[2Jx").expect(t, 0, "send")
	for range 2 {
		r := wq(t, dir, "peek", "--queue", "jobs-done")
		r.expect(t, 0, "peek", "plain", `evil\x1b[2Jx`, "2 messages shown from jobs-done (not consumed)")
		if strings.Contains(r.stdout, "\x1b") {
			t.Fatalf("peek printed a raw escape character:\n%q", r.stdout)
		}
	}
	wq(t, dir, "peek", "--queue", "jobs-done", "--limit", "1", "--json").expect(t, 0, "peek --json", `"body":"plain"`, `"dequeue_count":0`)
	wq(t, dir, "peek", "--queue", "jobs-poison").expect(t, 0, "peek empty", "no messages in jobs-poison")
	wq(t, dir, "peek").expect(t, 2, "peek without queue", "--queue is required")
}
