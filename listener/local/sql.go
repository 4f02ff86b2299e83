package local

import "strings"

const schema = `
CREATE TABLE IF NOT EXISTS messages (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	queue         TEXT    NOT NULL,
	body          BLOB    NOT NULL,
	attrs         TEXT,
	inserted_at   INTEGER NOT NULL,
	visible_at    INTEGER NOT NULL,
	expires_at    INTEGER NOT NULL DEFAULT 0,
	dequeue_count INTEGER NOT NULL DEFAULT 0,
	lease         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_ready ON messages (queue, visible_at, id);
`

// selectReadySQL must be served by messages_ready in index order: a scan in id order would
// walk past every leased row (see TestReceiveUsesReadyIndex).
// Its first parameter is the largest body it loads: a larger one is not read (SQLite reads a
// blob's length without its content), see bodyColumns.
const selectReadySQL = `SELECT id, ` + bodyColumns + `, attrs, inserted_at, dequeue_count, expires_at FROM messages
	WHERE queue = ? AND visible_at <= ? ORDER BY visible_at, id LIMIT ?`

// unleased is the lease column of a message no receive has leased yet: never a token
// (tokens are positive), and 8 bytes in SQLite's record format like every token, so a
// message's first lease rewrites its row at the same size (in place in its page) instead
// of growing it (0, the column's default, takes no bytes).
const unleased = "-4611686018427387904" // -(1<<62)

// bodyColumns selects a message's body only when it is at most the query's first parameter
// in bytes (NULL otherwise), and its length: a receive or list never loads a body it will
// not hand out.
const bodyColumns = `CASE WHEN length(body) <= ?1 THEN body END, length(body)`

// leaseSQL leases n messages (visible_at, lease token) by id. OR FAIL spares SQLite the
// statement journal that undoes a half-done multi-row statement (a copy of every page it
// touches): nothing here can fail halfway but a storage error, and that rolls back the whole
// group anyway.
func leaseSQL(n int) string {
	return "UPDATE OR FAIL messages NOT INDEXED SET visible_at = ?, lease = ?, dequeue_count = dequeue_count + 1 WHERE id IN (" +
		placeholders(n, "?") + ")"
}

// deleteLeasedSQL deletes those of n leased messages whose lease is still held (same queue,
// same token, not expired) and returns their ids.
func deleteLeasedSQL(n int) string {
	return "DELETE FROM messages NOT INDEXED WHERE id IN (" + placeholders(n, "?") +
		") AND queue = ? AND visible_at > ? AND (id, lease) IN (VALUES " + placeholders(n, "(?, ?)") + ") RETURNING id"
}

// deleteLeasedOneTokenSQL is deleteLeasedSQL for n messages that share one lease token (the
// common case: they were leased by one receive): one comparison per row instead of a probe
// of a VALUES table SQLite builds anew on each run.
func deleteLeasedOneTokenSQL(n int) string {
	return "DELETE FROM messages NOT INDEXED WHERE id IN (" + placeholders(n, "?") +
		") AND queue = ? AND visible_at > ? AND lease = ? RETURNING id"
}

func placeholders(n int, p string) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(p)
	}
	return sb.String()
}
