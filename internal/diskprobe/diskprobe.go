// Package diskprobe measures what a store's durability costs on this disk, for the local
// store's benchmarks and the bench module's drains: how many SQLite commits a database file
// made, and how many small writes each followed by an fsync the disk takes per second.
// Both benchmarks divide the one by the other (commits/s ÷ fsync/s): near 1 a store waits on
// the disk, far below it on the CPU. One probe for both, so their ceilings mean the same.
package diskprobe

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// commits counts SQLite commits per database file, for every connection the modernc
// driver opens in this process after the first Commits call (a connection hook: the
// driver's registration is process-wide, so this is too).
var commits struct {
	once sync.Once
	mu   sync.Mutex
	by   map[string]*atomic.Int64
}

// Commits returns the commit count of the database file path. Call it before the
// connections to count are opened: connections opened before the first call are not
// counted.
func Commits(path string) *atomic.Int64 {
	commits.once.Do(func() {
		commits.by = map[string]*atomic.Int64{}
		sqlite.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, dsn string) error {
			h, ok := c.(sqlite.HookRegisterer)
			if !ok {
				return nil
			}
			n := counter(dsnPath(dsn))
			h.RegisterCommitHook(func() int32 { n.Add(1); return 0 })
			return nil
		})
	})
	return counter(path)
}

func counter(path string) *atomic.Int64 {
	commits.mu.Lock()
	defer commits.mu.Unlock()
	n, ok := commits.by[path]
	if !ok {
		n = new(atomic.Int64)
		commits.by[path] = n
	}
	return n
}

// dsnPath is the file of a "file:path?query" DSN.
func dsnPath(dsn string) string {
	p, _, _ := strings.Cut(strings.TrimPrefix(dsn, "file:"), "?")
	if u, err := url.PathUnescape(p); err == nil {
		return u
	}
	return p
}

// WriteBytes is one probe write: a 4 KiB page, about what SQLite's WAL appends per commit
// (one page and its frame header) and smaller than a PostgreSQL WAL page.
const WriteBytes = 4096

// burst is how long one burst of a probe lasts.
const burst = 25 * time.Millisecond

// Fsync is a probe's result.
type Fsync struct {
	// PerSec is the median of the bursts' rates: a burst of another process's I/O on a
	// shared disk moves it less than a mean.
	PerSec float64
	// Bursts are the rates of each burst, in the order measured.
	Bursts []float64
}

// ProbeFsync measures the disk's fsync rate in dir as a SQLite WAL commit meets it once
// the WAL has reached its size: a WriteBytes write over a preallocated file, then fsync
// (SQLite on Linux calls fsync, not fdatasync), in bursts of 25 ms for d (at least one
// burst). A commit writes more than one page before its fsync, so this is the disk's best
// case, and a ceiling derived from it an upper bound. The file is removed.
func ProbeFsync(dir string, d time.Duration) (Fsync, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return Fsync{}, fmt.Errorf("fsync probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const pages = 256
	if _, err := f.WriteAt(make([]byte, WriteBytes*pages), 0); err != nil {
		return Fsync{}, fmt.Errorf("fsync probe: %w", err)
	}
	if err := f.Sync(); err != nil {
		return Fsync{}, fmt.Errorf("fsync probe: %w", err)
	}
	buf := make([]byte, WriteBytes)
	var p Fsync
	k := 0
	for end := time.Now().Add(d); len(p.Bursts) == 0 || time.Now().Before(end); {
		start, n := time.Now(), 0
		for ; time.Since(start) < burst; n++ {
			buf[0] = byte(k)
			if _, err := f.WriteAt(buf, int64(k%pages)*WriteBytes); err != nil {
				return Fsync{}, fmt.Errorf("fsync probe: %w", err)
			}
			if err := f.Sync(); err != nil {
				return Fsync{}, fmt.Errorf("fsync probe: %w", err)
			}
			k++
		}
		p.Bursts = append(p.Bursts, float64(n)/time.Since(start).Seconds())
	}
	sorted := slices.Sorted(slices.Values(p.Bursts))
	p.PerSec = sorted[len(sorted)/2]
	return p, nil
}
