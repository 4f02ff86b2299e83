package local

// MaxMessageBytes returns the largest body Send accepts on this queue: the store's
// Options.MaxBodyBytes (DefaultMaxBodyBytes, 64 MiB, unless set). Bodies are stored as they
// are, so attributes take nothing from it.
func (q *Queue) MaxMessageBytes() int { return int(q.b.maxBody) }
