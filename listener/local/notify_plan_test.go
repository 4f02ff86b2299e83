package local

import (
	"strings"
	"testing"
)

// TestNewRowsUsesRowidRange: the watcher's check must read only the rows added since the
// last check, whatever the size of the store; a scan would cost a busy host a full pass over
// the table at every check.
func TestNewRowsUsesRowidRange(t *testing.T) {
	all := queryPlan(t, newRowsSQL, int64(1))
	if !strings.Contains(all, "rowid>?") || strings.Contains(all, "messages_ready") {
		t.Fatalf("the new-rows check does not read a rowid range: %s", all)
	}
}
