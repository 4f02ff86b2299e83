package main

import (
	"strings"
	"testing"
)

// TestSendBadQueueNameIsUsageError: a queue name no tenant can own is the caller's mistake
// (exit 2), named in the error, and nothing is opened for it.
func TestSendBadQueueNameIsUsageError(t *testing.T) {
	for _, q := range []string{"Bad_Name", "other.jobs", strings.Repeat("q", 64)} {
		var out, errb strings.Builder
		c := &cli{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
		code := c.main(t.Context(), []string{"send", "--data-dir", t.TempDir(), "--queue", q, "body"})
		if code != exitUsage || !strings.Contains(errb.String(), "invalid queue name") {
			t.Errorf("send --queue %.20s…: exit %d, stderr %q; want exit 2 naming the invalid queue name", q, code, errb.String())
		}
	}
}
