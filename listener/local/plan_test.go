package local

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestReceiveUsesReadyIndex(t *testing.T) {
	t.Run("receive", func(t *testing.T) { testUsesReadyIndex(t, selectReadySQL, int64(1024), "q", int64(1), 32) })
	// A listing of dead letters walks the index from its cursor: no sort, no full scan.
	t.Run("list", func(t *testing.T) { testUsesReadyIndex(t, listSQL, int64(1024), "q", int64(5), int64(7), 32) })
}

func testUsesReadyIndex(t *testing.T, query string, args ...any) {
	all := queryPlan(t, query, args...)
	if !strings.Contains(all, "messages_ready") {
		t.Fatalf("receive does not use the (queue, visible_at, id) index: %s", all)
	}
	if strings.Contains(all, "TEMP B-TREE") {
		t.Fatalf("receive sorts instead of reading the index in order: %s", all)
	}
}

// The batch lease and delete statements find their rows by id: through messages_ready they
// would walk past every leased row of the queue for each batch.
func TestBatchStatementsUseRowid(t *testing.T) {
	for _, tt := range []struct {
		name string
		sql  string
		args []any
	}{
		{"lease", leaseSQL(3), []any{int64(9), int64(7), int64(1), int64(2), int64(3)}},
		{"delete", deleteLeasedSQL(2), []any{int64(1), int64(2), "q", int64(5), int64(1), int64(7), int64(2), int64(7)}},
		{"delete one token", deleteLeasedOneTokenSQL(2), []any{int64(1), int64(2), "q", int64(5), int64(7)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			all := queryPlan(t, tt.sql, tt.args...)
			if !strings.Contains(all, "INTEGER PRIMARY KEY (rowid=?)") || strings.Contains(all, "messages_ready") {
				t.Fatalf("%s does not look its rows up by id: %s", tt.name, all)
			}
		})
	}
}

// queryPlan returns SQLite's plan for query with args on a fresh store: the detail column of
// EXPLAIN QUERY PLAN, its steps joined by "; ".
func queryPlan(t *testing.T, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	b, err := Open(ctx, filepath.Join(t.TempDir(), "q.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rows, err := b.db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
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
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}
