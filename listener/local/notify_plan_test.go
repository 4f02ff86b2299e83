package local

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewRowsUsesRowidRange: the watcher's check must read only the rows added since the
// last check, whatever the size of the store; a scan would cost a busy host a full pass over
// the table at every check.
func TestNewRowsUsesRowidRange(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rows, err := b.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+newRowsSQL, int64(1))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	all := strings.Join(plan, "; ")
	if !strings.Contains(all, "rowid>?") || strings.Contains(all, "messages_ready") {
		t.Fatalf("the new-rows check does not read a rowid range: %s", all)
	}
}
