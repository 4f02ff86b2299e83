package local

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestReceiveUsesReadyIndex(t *testing.T) {
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rows, err := b.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+selectReadySQL, "q", int64(1), 32)
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
	if !strings.Contains(all, "messages_ready") {
		t.Fatalf("receive does not use the (queue, visible_at, id) index: %s", all)
	}
	if strings.Contains(all, "TEMP B-TREE") {
		t.Fatalf("receive sorts instead of reading the index in order: %s", all)
	}
}
