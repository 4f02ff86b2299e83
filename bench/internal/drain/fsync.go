package drain

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Fsync is the disk's rate of small durable writes, measured beside the drains: the ceiling
// a store that fsyncs every commit cannot pass, whatever its CPU cost.
type Fsync struct {
	// PerSec are appends of WriteBytes each followed by an fsync, per second.
	PerSec     float64 `json:"per_sec"`
	WriteBytes int     `json:"write_bytes"`
	// Dir is where the probe wrote (the drains' directory).
	Dir string `json:"dir"`
	// Probes are the rates of every probe of a run, one before each drain (PerSec is their
	// best: on a disk shared with other work they vary, and the best is the ceiling least
	// flattering to a store).
	Probes []float64 `json:"probes,omitempty"`
}

// probeBytes is one probe write: a 4 KiB page, about what SQLite's WAL appends per commit
// here (one page and its frame header) and smaller than a PostgreSQL WAL page.
const probeBytes = 4096

// ProbeFsync appends probeBytes to a new file in dir and fsyncs it, again and again for d
// (at least 10 times), and returns the rate. The file is removed.
func ProbeFsync(dir string, d time.Duration) (Fsync, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Fsync{}, err
	}
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return Fsync{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, probeBytes)
	n, start := 0, time.Now()
	for ; n < 10 || time.Since(start) < d; n++ {
		if _, err := f.Write(page); err != nil {
			return Fsync{}, fmt.Errorf("fsync probe: %w", err)
		}
		if err := f.Sync(); err != nil {
			return Fsync{}, fmt.Errorf("fsync probe: %w", err)
		}
	}
	abs, _ := filepath.Abs(dir)
	return Fsync{PerSec: float64(n) / time.Since(start).Seconds(), WriteBytes: probeBytes, Dir: abs}, nil
}
