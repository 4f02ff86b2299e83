package drain

import (
	"os"
	"path/filepath"
	"time"

	"github.com/wqhost/wqhost/internal/diskprobe"
)

// Fsync is the disk's rate of small durable writes, measured beside the drains: the ceiling
// a store that fsyncs every commit cannot pass, whatever its CPU cost.
type Fsync struct {
	// PerSec are writes of WriteBytes each followed by an fsync, per second.
	PerSec     float64 `json:"per_sec"`
	WriteBytes int     `json:"write_bytes"`
	// Dir is where the probe wrote (the drains' directory).
	Dir string `json:"dir"`
	// Probes are the rates of every probe of a run, one before each drain (PerSec is their
	// best: on a disk shared with other work they vary, and the best is the ceiling least
	// flattering to a store).
	Probes []float64 `json:"probes,omitempty"`
}

// ProbeFsync measures the disk's fsync rate in dir for d (diskprobe.ProbeFsync: the median
// of 25 ms bursts of a page written and fsynced), creating dir if needed.
func ProbeFsync(dir string, d time.Duration) (Fsync, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Fsync{}, err
	}
	p, err := diskprobe.ProbeFsync(dir, d)
	if err != nil {
		return Fsync{}, err
	}
	abs, _ := filepath.Abs(dir)
	return Fsync{PerSec: p.PerSec, WriteBytes: diskprobe.WriteBytes, Dir: abs}, nil
}
